/// Selective sync: which subtrees of a folder this node holds (`folder_selection`, 0008),
/// and the cluster's tree as the peers' indexes we hold describe it, one level at a time.
extension NodeIndex {
    /// The selected subtrees of a folder, in byte order; empty: the whole folder.
    package func selection(folderID: String) throws(IndexError) -> [String] {
        try read { db in
            try db.query("SELECT path FROM folder_selection WHERE folder_id = ? ORDER BY path", [.text(folderID)])
                .map { try $0.string("path") }
        }
    }

    /// Replaces the selection of a folder (empty: the whole folder), in one transaction.
    /// The caller validates the paths (`FolderSelection`). An unknown folder fails.
    package func setSelection(folderID: String, paths: [String]) throws(IndexError) {
        let path = self.path
        try write { db in
            guard try !db.query("SELECT 1 FROM folders WHERE folder_id = ?", [.text(folderID)]).isEmpty else {
                throw Self.noFolder(folderID, path: path, operation: "set folder selection")
            }
            try db.execute("DELETE FROM folder_selection WHERE folder_id = ?", [.text(folderID)])
            let insert = try db.cachedStatement("INSERT OR IGNORE INTO folder_selection (folder_id, path) VALUES (?, ?)")
            for path in paths {
                try insert.bind([.text(folderID), .text(path)])
                try insert.execute()
            }
        }
    }

    /// One name directly below a directory of the cluster's tree, with what lies below it.
    package struct TreeEntry: Sendable, Equatable {
        package var name: String
        package var isDirectory: Bool
        /// Live files at or below it that some peer holds, and their bytes (a path counts once,
        /// at the largest size a peer reports).
        package var files: Int64
        package var bytes: Int64
        /// Live files at or below it recorded here, and their bytes.
        package var localFiles: Int64 = 0
        package var localBytes: Int64 = 0
    }

    /// The names directly below `directory` ("" for the root) that some peer holds live,
    /// in byte order after `afterName`, at most `limit`, with their sizes in the cluster
    /// and here. Reads the subtree's rows of the peers' indexes (the index by path).
    package func clusterTree(folderID: String, directory: String, afterName: String?, limit: Int) throws(IndexError) -> [TreeEntry] {
        let (bounds, arguments, offset) = Self.subtreeBounds(folderID: folderID, directory: directory)
        let remote = """
            WITH cluster AS (
                SELECT path, max(deleted = 0 AND kind = 'directory') AS dir,
                       max(CASE WHEN deleted = 0 AND kind = 'file' THEN size ELSE 0 END) AS size,
                       max(deleted = 0 AND kind = 'file') AS file
                FROM remote_files WHERE folder_id = ? \(bounds) GROUP BY path HAVING max(deleted = 0) = 1),
            below AS (SELECT substr(path, ?) AS rest, dir, size, file FROM cluster)
            SELECT CASE instr(rest, '/') WHEN 0 THEN rest ELSE substr(rest, 1, instr(rest, '/') - 1) END AS name,
                   max(instr(rest, '/') > 0 OR dir = 1) AS directory, sum(file) AS files, sum(size) AS bytes
            FROM below GROUP BY name HAVING name > ? ORDER BY name LIMIT ?
            """
        var entries: [TreeEntry] = try read { db in
            try db.query(remote, arguments + [.integer(offset), .text(afterName ?? ""), .integer(Int64(max(1, limit)))]).map { row in
                TreeEntry(name: try row.string("name"), isDirectory: try row.int64("directory") != 0,
                          files: try row.int64("files"), bytes: try row.int64("bytes"))
            }
        }
        guard let first = entries.first?.name, let last = entries.last?.name else { return [] }
        let local = """
            WITH below AS (SELECT substr(path, ?) AS rest, size FROM files
                           WHERE folder_id = ? \(bounds) AND deleted = 0 AND kind = 'file')
            SELECT CASE instr(rest, '/') WHEN 0 THEN rest ELSE substr(rest, 1, instr(rest, '/') - 1) END AS name,
                   count(*) AS files, sum(size) AS bytes
            FROM below GROUP BY name HAVING name >= ? AND name <= ?
            """
        let held: [String: (Int64, Int64)] = try read { db in
            var held: [String: (Int64, Int64)] = [:]
            for row in try db.query(local, [.integer(offset)] + arguments + [.text(first), .text(last)]) {
                held[try row.string("name")] = (try row.int64("files"), try row.int64("bytes"))
            }
            return held
        }
        for n in entries.indices {
            if let (files, bytes) = held[entries[n].name] { (entries[n].localFiles, entries[n].localBytes) = (files, bytes) }
        }
        return entries
    }

    /// The WHERE clause (after `folder_id = ?`) that keeps the paths strictly below
    /// `directory`, its arguments (the folder ID first), and the 1-based character offset of
    /// the part below it. '0' follows '/' in byte order: the paths below "a" are exactly
    /// those between "a/" and "a0".
    private static func subtreeBounds(folderID: String, directory: String) -> (String, [SQLValue], Int64) {
        guard !directory.isEmpty else { return ("", [.text(folderID)], 1) }
        return ("AND path > ? AND path < ?", [.text(folderID), .text(directory + "/"), .text(directory + "0")],
                Int64(directory.unicodeScalars.count + 2))
    }
}
