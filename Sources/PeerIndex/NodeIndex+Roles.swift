/// Our role towards one peer in one folder, as stored (`folder_peers.role`, `no_deletes`).
package struct FolderPeerRole: Sendable, Equatable {
    /// 'both', 'send-only' or 'receive-only' (the CHECK of 0010 admits nothing else).
    package var role: String
    /// The peer's deletions are not applied here.
    package var noDeletes: Bool

    package init(role: String = "both", noDeletes: Bool = false) {
        self.role = role
        self.noDeletes = noDeletes
    }
}

/// When a pull of a peer's changes waits for the user (`folders.guard_percent`, `guard_files`).
package struct FolderGuardLimits: Sendable, Equatable {
    /// Share of the folder's live files (%) a pull may delete or replace; 0: no such limit.
    package var percent: Int
    /// Files a pull may delete or replace; 0: no such limit.
    package var files: Int

    package init(percent: Int = 50, files: Int = 1000) {
        self.percent = percent
        self.files = files
    }
}

extension NodeIndex {
    /// Every member's role in a folder, by device ID.
    package func folderPeerRoles(folderID: String) throws(IndexError) -> [String: FolderPeerRole] {
        try read { db in
            var roles: [String: FolderPeerRole] = [:]
            for row in try db.query("SELECT device_id, role, no_deletes FROM folder_peers WHERE folder_id = ?", [.text(folderID)]) {
                roles[try row.string("device_id")] = FolderPeerRole(role: try row.string("role"),
                                                                    noDeletes: try row.int64("no_deletes") != 0)
            }
            return roles
        }
    }

    /// Sets our role towards a member of a folder (the member must exist).
    package func setFolderPeerRole(folderID: String, deviceID: String, _ role: FolderPeerRole) throws(IndexError) {
        let path = self.path
        try write { db in
            try db.execute("UPDATE folder_peers SET role = ?, no_deletes = ? WHERE folder_id = ? AND device_id = ?",
                           [.text(role.role), .integer(role.noDeletes ? 1 : 0), .text(folderID), .text(deviceID)])
            guard db.changes == 1 else { throw Self.noFolderPeer(folderID, deviceID, path: path, operation: "set role") }
        }
    }

    /// The folder's mass-change guard limits.
    package func folderGuardLimits(folderID: String) throws(IndexError) -> FolderGuardLimits {
        let path = self.path
        return try read { db in
            guard let row = try db.query("SELECT guard_percent, guard_files FROM folders WHERE folder_id = ?", [.text(folderID)]).first else {
                throw Self.noFolder(folderID, path: path, operation: "read guard limits")
            }
            return FolderGuardLimits(percent: Int(try row.int64("guard_percent")), files: Int(try row.int64("guard_files")))
        }
    }

    /// Sets the folder's mass-change guard limits (percent 0…100, files ≥ 0; 0 turns a limit off).
    package func setFolderGuardLimits(folderID: String, _ limits: FolderGuardLimits) throws(IndexError) {
        let path = self.path
        try write { db in
            try db.execute("UPDATE folders SET guard_percent = ?, guard_files = ? WHERE folder_id = ?",
                           [.integer(Int64(limits.percent)), .integer(Int64(limits.files)), .text(folderID)])
            guard db.changes == 1 else { throw Self.noFolder(folderID, path: path, operation: "set guard limits") }
        }
    }
}
