/// What each member of a folder said it holds of it (`folder_peer_selection`, 0012): a
/// display hint for `status`, kept across restarts. A member without rows holds everything.
extension NodeIndex {
    /// Every member's announced subtrees of a folder (by compact device ID), in byte order.
    /// Bounded by the members and what each may announce (the caller's check, 1,000 paths).
    package func peerSelections(folderID: String) throws(IndexError) -> [String: [String]] {
        try read { db in
            var found: [String: [String]] = [:]
            for row in try db.query("SELECT device_id, path FROM folder_peer_selection WHERE folder_id = ? ORDER BY device_id, path",
                                    [.text(folderID)]) {
                found[try row.string("device_id"), default: []].append(try row.string("path"))
            }
            return found
        }
    }

    /// Replaces what a member said it holds of a folder (empty: everything), in one
    /// transaction. The caller validates the paths (`FolderSelection`); a device that is not
    /// a member of the folder fails (the foreign key).
    package func setPeerSelection(folderID: String, deviceID: String, paths: [String]) throws(IndexError) {
        try write { db in
            try db.execute("DELETE FROM folder_peer_selection WHERE folder_id = ? AND device_id = ?", [.text(folderID), .text(deviceID)])
            let insert = try db.cachedStatement("INSERT OR IGNORE INTO folder_peer_selection (folder_id, device_id, path) VALUES (?, ?, ?)")
            for path in paths {
                try insert.bind([.text(folderID), .text(deviceID), .text(path)])
                try insert.execute()
            }
        }
    }
}
