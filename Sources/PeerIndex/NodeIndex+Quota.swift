/// Counts behind the per-peer quota on stored index entries (`remote_files`).
extension NodeIndex {
    /// How many rows (tombstones included) the peer's index of the folder holds, and how
    /// many of `paths` are among them: a batch adds `paths.count - existing` new rows.
    package func remoteFileCounts(folderID: String, deviceID: String,
                                 paths: [String]) throws(IndexError) -> (stored: Int, existing: Int) {
        let list = "[" + paths.map(Self.jsonString).joined(separator: ",") + "]"
        return try read { db in
            let stored = try db.query("SELECT count(*) AS n FROM remote_files WHERE folder_id = ? AND device_id = ?",
                                      [.text(folderID), .text(deviceID)]).first?.int("n") ?? 0
            let existing = try db.query(
                """
                SELECT count(*) AS n FROM remote_files
                WHERE folder_id = ? AND device_id = ? AND path IN (SELECT value FROM json_each(?))
                """, [.text(folderID), .text(deviceID), .text(list)]).first?.int("n") ?? 0
            return (stored, existing)
        }
    }

    /// How many rows the peer's index of the folder holds, counted up to `limit` at most (a
    /// count that stops early: far below its quota, a peer's page needs no exact count).
    package func remoteFileCount(folderID: String, deviceID: String, upTo limit: Int) throws(IndexError) -> Int {
        try read { db in
            try db.query("SELECT count(*) AS n FROM (SELECT 1 FROM remote_files WHERE folder_id = ? AND device_id = ? LIMIT ?)",
                         [.text(folderID), .text(deviceID), .integer(Int64(max(0, limit)))]).first?.int("n") ?? 0
        }
    }

    /// Our entries of the folder that a peer cannot have made us store: live ones, and
    /// tombstones of deletions made here (`modifiedBy` is us). Tombstones we recorded while
    /// applying a peer's deletions are left out, so a member's flood of deletions for paths
    /// that never existed cannot raise its own quota.
    package func ownEntryCount(folderID: String, localDevice: String) throws(IndexError) -> Int {
        try read { db in
            try db.query("SELECT count(*) AS n FROM files WHERE folder_id = ? AND (deleted = 0 OR modified_by = ?)",
                         [.text(folderID), .text(localDevice)]).first?.int("n") ?? 0
        }
    }

    /// `text` as a JSON string literal.
    private static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
