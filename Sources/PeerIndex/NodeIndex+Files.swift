internal import PeerModel

/// The local index of each folder (`files`, `file_chunks`) and the peers' indexes (`remote_files`).
///
/// Writes take whole batches: one transaction and reused prepared statements per call,
/// so a scan commits 10,000 files at a time instead of one commit per file. Reads of a
/// whole folder come in pages (by path or by sequence) so 100,000 files never need to be
/// in memory at once.
extension NodeIndex {
    static let fileColumns = """
        file_id, folder_id, path, sequence, kind, size, mtime_ns, mode, inode, deleted, symlink_target, \
        version, root_hash, modified_by
        """
    static let remoteFileColumns = """
        path, sequence, kind, size, mtime_ns, mode, deleted, symlink_target, version, root_hash, modified_by, manifest
        """

    // MARK: Local files

    /// Inserts or replaces (by folder and path) each record with its chunk list, giving each
    /// a new local sequence number from its folder's counter (`maxSequence` + 1, + 2, … in
    /// batch order), all in one transaction. Returns the records with their sequences.
    ///
    /// Every record counts as a change: callers pass only paths that changed. Sequence
    /// numbers are never given twice in a folder, even after `removeFiles`. An unknown
    /// folder fails the whole batch with `.notFound`; a CHECK failure rolls it back.
    @discardableResult
    package func upsertFiles(_ records: [FileRecord]) throws(IndexError) -> [FileRecord] {
        guard !records.isEmpty else { return [] }
        let path = self.path
        let versions = records.map { $0.version.json }
        return try write { db in
            var counters: [String: Int64] = [:]
            let counter = try db.cachedStatement("SELECT max_sequence FROM folders WHERE folder_id = ?")
            // No RETURNING: SQLite buffers a RETURNING statement's rows in a temporary b-tree
            // that it opens and closes on every run (a quarter of the upsert's time, B: 10,000
            // files). The row ID of an inserted row is the connection's last insert row ID,
            // set to 0 first; an updated row's is looked up.
            let upsert = try db.cachedStatement(
                """
                INSERT INTO files (folder_id, path, sequence, kind, size, mtime_ns, mode, inode, deleted, symlink_target,
                                   version, root_hash, modified_by)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                ON CONFLICT (folder_id, path) DO UPDATE SET
                    sequence = excluded.sequence, kind = excluded.kind, size = excluded.size, mtime_ns = excluded.mtime_ns,
                    mode = excluded.mode, inode = excluded.inode, deleted = excluded.deleted,
                    symlink_target = excluded.symlink_target, version = excluded.version, root_hash = excluded.root_hash,
                    modified_by = excluded.modified_by
                """)
            let updatedID = try db.cachedStatement("SELECT file_id FROM files WHERE folder_id = ? AND path = ?")
            let clearChunks = try db.cachedStatement("DELETE FROM file_chunks WHERE file_id = ?")
            // Chunks of a row that is gone can only be under an ID up to the highest one
            // file_chunks holds now: a row inserted with a higher ID has none to clear (a
            // DELETE per new file was 0.15 CPU-s of D's 50,000 on alice).
            let highestChunked = try db.query("SELECT max(file_id) AS id FROM file_chunks").first?.optionalInt64("id") ?? 0
            let insertChunk = try db.cachedStatement(
                "INSERT INTO file_chunks (file_id, chunk_index, offset, size, hash) VALUES (?, ?, ?, ?, ?)")
            var result = records
            for (n, record) in records.enumerated() {
                var last: Int64
                if let known = counters[record.folderID] {
                    last = known
                } else {
                    try counter.bind([.text(record.folderID)])
                    defer { counter.reset() }
                    guard try counter.step(), let value = counter.int64(at: 0) else {
                        throw Self.noFolder(record.folderID, path: path, operation: "upsert files")
                    }
                    last = value
                }
                last += 1
                counters[record.folderID] = last
                result[n].sequence = last

                try upsert.bind([
                    .text(record.folderID), .text(record.path), .integer(last), .text(record.kind.rawValue),
                    .integer(record.size), .integer(record.mtimeNs), .integer(Int64(record.mode)),
                    SQLValue(record.inode.map { Int64(bitPattern: $0) }), SQLValue(record.deleted),
                    SQLValue(record.symlinkTarget), .text(versions[n]), SQLValue(record.rootHash), .text(record.modifiedBy),
                ])
                db.lastInsertRowID = 0
                try upsert.execute()
                var fileID = db.lastInsertRowID
                let inserted = fileID != 0
                if !inserted {
                    try updatedID.bind([.text(record.folderID), .text(record.path)])
                    defer { updatedID.reset() }
                    guard try updatedID.step(), let id = updatedID.int64(at: 0) else {
                        throw IndexError(kind: .sqlite, operation: "upsert files", path: path, message: "no file_id for an updated row")
                    }
                    fileID = id
                }
                // The old chunk list goes. A new row has none while foreign keys cascade, but
                // a row deleted by a tool that does not enforce them (the sqlite3 shell) leaves
                // its chunks to the next row given its ID.
                if !inserted || fileID <= highestChunked {
                    try clearChunks.bind([.integer(fileID)])
                    try clearChunks.execute()
                }
                try insertChunk.bind(.integer(fileID), at: 1)
                for (index, chunk) in record.chunks.enumerated() {
                    try insertChunk.bind(.integer(Int64(index)), at: 2)
                    try insertChunk.bind(.integer(chunk.offset), at: 3)
                    try insertChunk.bind(.integer(chunk.size), at: 4)
                    try insertChunk.bind(.blob(chunk.hash), at: 5)
                    try insertChunk.execute()
                }
            }
            let store = try db.cachedStatement("UPDATE folders SET max_sequence = ? WHERE folder_id = ?")
            for (folderID, last) in counters {
                try store.bind([.integer(last), .text(folderID)])
                try store.execute()
            }
            return result
        }
    }

    /// Removes paths from the local index (with their chunks), e.g. newly ignored files or
    /// purged tombstones. Their sequence numbers are not given again. Returns how many existed.
    @discardableResult
    package func removeFiles(folderID: String, paths: [String]) throws(IndexError) -> Int {
        try write { db in
            let delete = try db.cachedStatement("DELETE FROM files WHERE folder_id = ? AND path = ?")
            var removed = 0
            for filePath in paths {
                try delete.bind([.text(folderID), .text(filePath)])
                try delete.execute()
                removed += db.changes
            }
            return removed
        }
    }

    /// The record of one path (with its chunks), or nil.
    package func file(folderID: String, path filePath: String) throws(IndexError) -> FileRecord? {
        try read { db in
            try Self.loadFiles(db, where: "folder_id = ? AND path = ?", [.text(folderID), .text(filePath)],
                               includeChunks: true).first
        }
    }

    /// Every record of a folder, by path. For large folders prefer the paged
    /// `files(folderID:afterPath:limit:)`, which keeps memory bounded.
    package func files(folderID: String, includeChunks: Bool = true) throws(IndexError) -> [FileRecord] {
        try read { db in
            try Self.loadFiles(db, where: "folder_id = ? ORDER BY path", [.text(folderID)], includeChunks: includeChunks)
        }
    }

    /// A page of a folder's records by path (BINARY collation: UTF-8 byte order): those after
    /// `afterPath` (nil: from the first), before `beforePath` and up to `throughPath` (nil:
    /// to the last), at most `limit`. Pass the last path of a page to get the next; an empty
    /// page ends. `liveOnly` leaves tombstones out. `maxSequence` leaves out records changed
    /// after the folder's counter was there: a reader that records changes while it pages
    /// (a scan) reads what the index held when it started, not its own writes.
    package func files(folderID: String, afterPath: String?, beforePath: String? = nil, throughPath: String? = nil,
                      liveOnly: Bool = false, maxSequence: Int64? = nil, limit: Int,
                      includeChunks: Bool = true) throws(IndexError) -> [FileRecord] {
        var clause = "folder_id = ?"
        var bindings: [SQLValue] = [.text(folderID)]
        for (bound, op) in [(afterPath, ">"), (beforePath, "<"), (throughPath, "<=")] {
            guard let bound else { continue }
            clause += " AND path \(op) ?"
            bindings.append(.text(bound))
        }
        if liveOnly { clause += " AND deleted = 0" }
        if let maxSequence {
            // "+": never walk files_by_sequence for this, the page is read in path order.
            clause += " AND +sequence <= ?"
            bindings.append(.integer(maxSequence))
        }
        bindings.append(.integer(Int64(limit)))
        return try read { db in
            try Self.loadFiles(db, where: clause + " ORDER BY path LIMIT ?", bindings, includeChunks: includeChunks)
        }
    }

    /// Paths of the live records (no tombstones) matching a GLOB pattern (case-sensitive,
    /// `*` and `?` wildcards), by path: a prefilter, e.g. for conflict copies.
    package func livePaths(folderID: String, matching glob: String) throws(IndexError) -> [String] {
        try read { db in
            let statement = try db.cachedStatement(
                "SELECT path FROM files WHERE folder_id = ? AND deleted = 0 AND path GLOB ? ORDER BY path")
            try statement.bind([.text(folderID), .text(glob)])
            defer { statement.reset() }
            var paths: [String] = []
            while try statement.step() { paths.append(statement.string(at: 0) ?? "") }
            return paths
        }
    }

    /// Counts and bytes of a folder's live records, added up by SQLite (no record is loaded).
    package func liveTotals(folderID: String) throws(IndexError) -> LiveTotals {
        try read { db in
            let statement = try db.cachedStatement(
                """
                SELECT count(*), coalesce(sum(kind = 'file'), 0), coalesce(sum(size), 0)
                FROM files WHERE folder_id = ? AND deleted = 0
                """)
            try statement.bind([.text(folderID)])
            defer { statement.reset() }
            guard try statement.step() else { return LiveTotals() }
            return LiveTotals(entries: Int(statement.int64(at: 0) ?? 0), files: Int(statement.int64(at: 1) ?? 0),
                              bytes: statement.int64(at: 2) ?? 0)
        }
    }

    /// Records changed after local sequence `since`, in sequence order, at most `limit`:
    /// what an index update to a peer that acknowledged `since` carries.
    package func files(folderID: String, since sequence: Int64, limit: Int, includeChunks: Bool = true) throws(IndexError) -> [FileRecord] {
        try read { db in
            try Self.loadFiles(db, where: "folder_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
                               [.text(folderID), .integer(sequence), .integer(Int64(limit))], includeChunks: includeChunks)
        }
    }

    /// Live local records with this content (root hash), in one folder or all, at most
    /// `limit`: a file to copy instead of downloading.
    package func files(rootHash: [UInt8], folderID: String? = nil, limit: Int = 16) throws(IndexError) -> [FileRecord] {
        try read { db in
            if let folderID {
                try Self.loadFiles(db, where: "root_hash = ? AND folder_id = ? AND deleted = 0 ORDER BY file_id LIMIT ?",
                                   [.blob(rootHash), .text(folderID), .integer(Int64(limit))], includeChunks: true)
            } else {
                try Self.loadFiles(db, where: "root_hash = ? AND deleted = 0 ORDER BY file_id LIMIT ?",
                                   [.blob(rootHash), .integer(Int64(limit))], includeChunks: true)
            }
        }
    }

    /// Number of records (tombstones included) in a folder.
    package func fileCount(folderID: String) throws(IndexError) -> Int {
        try read { db in
            try db.query("SELECT count(*) AS n FROM files WHERE folder_id = ?", [.text(folderID)]).first?.int("n") ?? 0
        }
    }

    /// Where a chunk with `hash` can be read in live local files (any folder), at most `limit`.
    package func localChunkLocations(hash: [UInt8], limit: Int = 16) throws(IndexError) -> [ChunkLocation] {
        try localChunkLocations(hashes: [hash], limit: limit)[hash] ?? []
    }

    // MARK: Remote files

    /// Inserts or replaces (by path) entries of a peer's index of a folder, all in one
    /// transaction; with `receivedSequence`, also records it in `folder_peers` in the same
    /// transaction, so a crash never leaves the sequence ahead of the stored entries.
    /// The folder must be shared with the device (`.notFound` otherwise).
    package func upsertRemoteFiles(folderID: String, deviceID: String, _ records: [RemoteFileRecord],
                                  receivedSequence: Int64? = nil) throws(IndexError) {
        let path = self.path
        let versions = records.map { $0.version.json }
        try write { db in
            guard try !db.query("SELECT 1 FROM folder_peers WHERE folder_id = ? AND device_id = ?",
                                [.text(folderID), .text(deviceID)]).isEmpty else {
                throw Self.noFolderPeer(folderID, deviceID, path: path, operation: "upsert remote files")
            }
            let upsert = try db.cachedStatement(
                """
                INSERT INTO remote_files (folder_id, device_id, \(Self.remoteFileColumns))
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
                ON CONFLICT (folder_id, device_id, path) DO UPDATE SET
                    sequence = excluded.sequence, kind = excluded.kind, size = excluded.size, mtime_ns = excluded.mtime_ns,
                    mode = excluded.mode, deleted = excluded.deleted, symlink_target = excluded.symlink_target,
                    version = excluded.version, root_hash = excluded.root_hash, modified_by = excluded.modified_by,
                    manifest = excluded.manifest
                """)
            for (n, record) in records.enumerated() {
                try upsert.bind([
                    .text(folderID), .text(deviceID), .text(record.path), .integer(record.sequence),
                    .text(record.kind.rawValue), .integer(record.size), .integer(record.mtimeNs),
                    .integer(Int64(record.mode)), SQLValue(record.deleted), SQLValue(record.symlinkTarget),
                    .text(versions[n]), SQLValue(record.rootHash), .text(record.modifiedBy), SQLValue(record.manifest),
                ])
                try upsert.execute()
            }
            if let receivedSequence {
                try db.execute("UPDATE folder_peers SET received_sequence = ? WHERE folder_id = ? AND device_id = ?",
                               [.integer(receivedSequence), .text(folderID), .text(deviceID)])
            }
        }
    }

    /// A peer's whole index of a folder, by path. For large folders prefer the paged variant.
    package func remoteFiles(folderID: String, deviceID: String) throws(IndexError) -> [RemoteFileRecord] {
        try read { db in
            try Self.loadRemoteFiles(db, where: "folder_id = ? AND device_id = ? ORDER BY path",
                                     [.text(folderID), .text(deviceID)])
        }
    }

    /// A page of a peer's index by path: entries after `afterPath` (nil: from the first), at most `limit`.
    package func remoteFiles(folderID: String, deviceID: String, afterPath: String?, limit: Int) throws(IndexError) -> [RemoteFileRecord] {
        try read { db in
            try Self.loadRemoteFiles(db, where: "folder_id = ? AND device_id = ? AND path > ? ORDER BY path LIMIT ?",
                                     [.text(folderID), .text(deviceID), .text(afterPath ?? ""), .integer(Int64(limit))])
        }
    }

    /// A peer's entries with its sequence above `since`, in sequence order, at most `limit`:
    /// what changed there since the last planning pass.
    package func remoteFiles(folderID: String, deviceID: String, since sequence: Int64, limit: Int) throws(IndexError) -> [RemoteFileRecord] {
        try read { db in
            try Self.loadRemoteFiles(db, where: "folder_id = ? AND device_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
                                     [.text(folderID), .text(deviceID), .integer(sequence), .integer(Int64(limit))])
        }
    }

    /// Every peer's entries for the next `pathLimit` paths (after `afterPath`, nil: from the
    /// first) that any peer reported, by path (BINARY order) then device: a page of what the
    /// planner compares, all peers of a path together. Pass the last path to get the next page.
    package func remoteFiles(folderID: String, afterPath: String?,
                            pathLimit: Int) throws(IndexError) -> [(deviceID: String, record: RemoteFileRecord)] {
        try read { db in
            let statement = try db.cachedStatement(
                """
                SELECT device_id, \(Self.remoteFileColumns) FROM remote_files
                WHERE folder_id = ?1 AND path IN (SELECT DISTINCT path FROM remote_files WHERE folder_id = ?1 AND path > ?2
                                                  ORDER BY path LIMIT ?3)
                ORDER BY path, device_id
                """)
            try statement.bind([.text(folderID), .text(afterPath ?? ""), .integer(Int64(pathLimit))])
            defer { statement.reset() }
            var result: [(deviceID: String, record: RemoteFileRecord)] = []
            while try statement.step() {
                result.append((statement.string(at: 0) ?? "", try Self.remoteFileRecord(statement, from: 1, path: db.path)))
            }
            return result
        }
    }

    /// How a peer's index of a folder compares with ours, without loading either: its live
    /// entries, and the entries we lack (its tombstones of paths we never had aside) or hold
    /// with another version, with the bytes of the live ones. Versions whose JSON texts are
    /// equal are the same; for texts that differ, `versionsDiffer` decides (equal counters
    /// can be written differently, e.g. with a counter of 0). `counts` (path, is a directory)
    /// leaves out paths this node does not hold (selective sync).
    package func compareRemote(folderID: String, deviceID: String, counts: ((String, Bool) -> Bool)? = nil,
                              versionsDiffer: ([String: UInt64], [String: UInt64]) -> Bool) throws(IndexError) -> RemoteComparison {
        try read { db in
            var result = RemoteComparison()
            let live = try db.cachedStatement(
                "SELECT count(*) FROM remote_files WHERE folder_id = ? AND device_id = ? AND deleted = 0")
            try live.bind([.text(folderID), .text(deviceID)])
            do {
                defer { live.reset() }
                if try live.step() { result.liveEntries = Int(live.int64(at: 0) ?? 0) }
            }
            let candidates = try db.cachedStatement(
                """
                SELECT r.deleted, r.size, r.version, l.version, r.path, r.kind
                FROM remote_files AS r LEFT JOIN files AS l ON l.folder_id = r.folder_id AND l.path = r.path
                WHERE r.folder_id = ? AND r.device_id = ?
                  AND ((l.file_id IS NULL AND r.deleted = 0) OR (l.file_id IS NOT NULL AND l.version <> r.version))
                """)
            try candidates.bind([.text(folderID), .text(deviceID)])
            defer { candidates.reset() }
            while try candidates.step() {
                if let local = candidates.string(at: 3) {
                    if let theirs = VersionJSON.decode(candidates.string(at: 2) ?? ""), let ours = VersionJSON.decode(local),
                       !versionsDiffer(ours, theirs) { continue }
                }
                if let counts, !counts(candidates.string(at: 4) ?? "", candidates.string(at: 5) == "directory") { continue }
                result.outOfSyncFiles += 1
                if candidates.int64(at: 0) != 1 { result.outOfSyncBytes += candidates.int64(at: 1) ?? 0 }
            }
            // What we have that the peer has not reported at all (before its index, or while
            // it is still applying ours): not in sync either. Left out, this said a peer that
            // held 74 % of 100,000 files was at 100 % for 7 s.
            let missing = try db.cachedStatement(
                """
                SELECT l.size, l.path, l.kind FROM files AS l
                WHERE l.folder_id = ? AND l.deleted = 0 AND NOT EXISTS (
                    SELECT 1 FROM remote_files AS r WHERE r.folder_id = l.folder_id AND r.device_id = ? AND r.path = l.path)
                """)
            try missing.bind([.text(folderID), .text(deviceID)])
            defer { missing.reset() }
            while try missing.step() {
                if let counts, !counts(missing.string(at: 1) ?? "", missing.string(at: 2) == "directory") { continue }
                result.outOfSyncFiles += 1
                result.outOfSyncBytes += missing.int64(at: 0) ?? 0
            }
            return result
        }
    }

    /// One path of a peer's index, or nil.
    package func remoteFile(folderID: String, deviceID: String, path filePath: String) throws(IndexError) -> RemoteFileRecord? {
        try read { db in
            try Self.loadRemoteFiles(db, where: "folder_id = ? AND device_id = ? AND path = ?",
                                     [.text(folderID), .text(deviceID), .text(filePath)]).first
        }
    }

    /// Every peer's entry for one path, keyed by device ID: what the planner compares.
    package func remoteFiles(folderID: String, path filePath: String) throws(IndexError) -> [String: RemoteFileRecord] {
        try remoteFiles(folderID: folderID, paths: [filePath])[filePath] ?? [:]
    }

    /// Forgets a peer's index of a folder. Returns how many entries there were.
    @discardableResult
    package func removeRemoteFiles(folderID: String, deviceID: String) throws(IndexError) -> Int {
        try write { db in
            try db.execute("DELETE FROM remote_files WHERE folder_id = ? AND device_id = ?", [.text(folderID), .text(deviceID)])
            return db.changes
        }
    }

    // MARK: Decoding

    /// Runs `SELECT fileColumns FROM files WHERE <clause>` and decodes the rows, then the
    /// chunk lists (a second statement, so the first is finished before it runs).
    static func loadFiles(_ db: Database, where clause: String, _ bindings: [SQLValue],
                                  includeChunks: Bool) throws -> [FileRecord] {
        let statement = try db.cachedStatement("SELECT \(fileColumns) FROM files WHERE \(clause)")
        try statement.bind(bindings)
        var ids: [Int64] = []
        var records: [FileRecord] = []
        do {
            defer { statement.reset() }
            while try statement.step() {
                ids.append(statement.int64(at: 0) ?? 0)
                records.append(try fileRecord(statement, path: db.path))
            }
        }
        guard includeChunks, !records.isEmpty else { return records }
        let chunks = try db.cachedStatement("SELECT offset, size, hash FROM file_chunks WHERE file_id = ? ORDER BY chunk_index")
        for (n, id) in ids.enumerated() where records[n].kind == .file && !records[n].deleted {
            try chunks.bind([.integer(id)])
            defer { chunks.reset() }
            while try chunks.step() {
                records[n].chunks.append(FileChunkRecord(offset: chunks.int64(at: 0) ?? 0, size: chunks.int64(at: 1) ?? 0,
                                                         hash: chunks.blob(at: 2) ?? []))
            }
        }
        return records
    }

    private static func fileRecord(_ s: Statement, path: String) throws(IndexError) -> FileRecord {
        FileRecord(
            folderID: s.string(at: 1) ?? "",
            FileEntry(path: s.string(at: 2) ?? "", kind: try kind(s.string(at: 4), path: path), size: s.int64(at: 5) ?? 0,
                      mtimeNs: s.int64(at: 6) ?? 0, mode: UInt32(truncatingIfNeeded: s.int64(at: 7) ?? 0),
                      deleted: s.int64(at: 9) == 1, symlinkTarget: s.string(at: 10),
                      version: try version(s.string(at: 11), path: path), rootHash: s.blob(at: 12),
                      modifiedBy: s.string(at: 13) ?? "", sequence: s.int64(at: 3) ?? 0),
            inode: s.int64(at: 8).map { UInt64(bitPattern: $0) })
    }

    private static func loadRemoteFiles(_ db: Database, where clause: String, _ bindings: [SQLValue]) throws -> [RemoteFileRecord] {
        let statement = try db.cachedStatement("SELECT \(remoteFileColumns) FROM remote_files WHERE \(clause)")
        try statement.bind(bindings)
        defer { statement.reset() }
        var records: [RemoteFileRecord] = []
        while try statement.step() {
            records.append(try remoteFileRecord(statement, from: 0, path: db.path))
        }
        return records
    }

    static func remoteFileRecord(_ s: Statement, from c: Int, path: String) throws(IndexError) -> RemoteFileRecord {
        RemoteFileRecord(
            FileEntry(path: s.string(at: c) ?? "", kind: try kind(s.string(at: c + 2), path: path),
                      size: s.int64(at: c + 3) ?? 0, mtimeNs: s.int64(at: c + 4) ?? 0,
                      mode: UInt32(truncatingIfNeeded: s.int64(at: c + 5) ?? 0), deleted: s.int64(at: c + 6) == 1,
                      symlinkTarget: s.string(at: c + 7), version: try version(s.string(at: c + 8), path: path),
                      rootHash: s.blob(at: c + 9), modifiedBy: s.string(at: c + 10) ?? "", sequence: s.int64(at: c + 1) ?? 0),
            manifest: s.blob(at: c + 11))
    }

    private static func kind(_ text: String?, path: String) throws(IndexError) -> FileKind {
        guard let text, let kind = FileKind(rawValue: text) else {
            throw IndexError(kind: .unexpectedValue, operation: "read file", path: path,
                             message: "unknown file kind \(text ?? "NULL")")
        }
        return kind
    }

    private static func version(_ text: String?, path: String) throws(IndexError) -> VersionVector {
        guard let text, let version = VersionVector(json: text) else {
            throw IndexError(kind: .unexpectedValue, operation: "read file", path: path,
                             message: "version is not a JSON object of counters: \(text ?? "NULL")")
        }
        return version
    }
}
