internal import PeerModel

/// Lookups of many paths or chunks at once, for the folder puller: one call takes the
/// connection once and runs its statements in one read transaction (a single snapshot, and
/// SQLite's locks taken once instead of once per statement).
extension NodeIndex {
    /// Runs `body` in a read transaction (`BEGIN` … `COMMIT`, nothing written).
    func readTransaction<T: Sendable>(_ body: (Database) throws -> T) throws(IndexError) -> T {
        try read { db in
            try db.execute("BEGIN")
            defer {
                // Nothing was written: if COMMIT fails, end it anyway so no later write
                // takes this read transaction for its own.
                if (try? db.execute("COMMIT")) == nil, db.isInTransaction { try? db.execute("ROLLBACK") }
            }
            return try body(db)
        }
    }

    /// The local records of `paths` (with chunks unless `includeChunks` is false: the
    /// planner compares versions and root hashes only), keyed by path; absent paths are left out.
    package func files(folderID: String, paths: some Sequence<String>, includeChunks: Bool = true) throws(IndexError) -> [String: FileRecord] {
        try files(folderID: folderID, paths: paths, includeChunks: includeChunks, keyedBy: { $0 })
    }

    /// `files(folderID:paths:includeChunks:)` keyed by `key(path)`: a `String` key takes
    /// names that differ only by Unicode normalization as one, so the folder code keys by
    /// the paths' bytes.
    package func files<Key: Hashable & Sendable>(folderID: String, paths: some Sequence<String>, includeChunks: Bool = true,
                                                keyedBy key: (String) -> Key) throws(IndexError) -> [Key: FileRecord] {
        let list = Array(paths)
        return try readTransaction { db in
            var result: [Key: FileRecord] = [:]
            for path in list {
                if let record = try Self.loadFiles(db, where: "folder_id = ? AND path = ?", [.text(folderID), .text(path)],
                                                   includeChunks: includeChunks).first {
                    result[key(path)] = record
                }
            }
            return result
        }
    }

    /// Every peer's entry for each of `paths`: path → device ID → entry.
    package func remoteFiles(folderID: String, paths: some Sequence<String>) throws(IndexError) -> [String: [String: RemoteFileRecord]] {
        try remoteFiles(folderID: folderID, paths: paths, keyedBy: { $0 })
    }

    /// `remoteFiles(folderID:paths:)` keyed by `key(path)` (see `files(folderID:paths:includeChunks:keyedBy:)`).
    package func remoteFiles<Key: Hashable & Sendable>(folderID: String, paths: some Sequence<String>,
                                                      keyedBy key: (String) -> Key) throws(IndexError) -> [Key: [String: RemoteFileRecord]] {
        let list = Array(paths)
        return try readTransaction { db in
            let statement = try db.cachedStatement(
                "SELECT device_id, \(Self.remoteFileColumns) FROM remote_files WHERE folder_id = ? AND path = ?")
            var result: [Key: [String: RemoteFileRecord]] = [:]
            for path in list {
                try statement.bind([.text(folderID), .text(path)])
                defer { statement.reset() }
                while try statement.step() {
                    result[key(path), default: [:]][statement.string(at: 0) ?? ""] = try Self.remoteFileRecord(statement, from: 1, path: db.path)
                }
            }
            return result
        }
    }

    /// Those of `paths` where `deviceID`'s entry changes nothing we plan: its version is
    /// dominated by our record's, or equal to it with the same content and the same applied
    /// metadata (mode; mtime for a file). What a peer reports back after taking our entries
    /// (its echo) is such an entry; an equal version with other content (a tie made by merges
    /// on different nodes) is not. Paths without our record or without that entry are not.
    package func echoedPaths<Key: Hashable & Sendable>(folderID: String, deviceID: String, paths: some Sequence<String>,
                                                      keyedBy key: (String) -> Key) throws(IndexError) -> Set<Key> {
        let list = Array(paths)
        guard !list.isEmpty else { return [] }
        return try readTransaction { db in
            // A group of paths per statement (B's echo: 10,000 paths, one statement each was
            // 0.8 % of alice); a short last group repeats its last path (IN ignores repeats),
            // so one cached statement serves every group.
            let group = Self.echoGroup
            let statement = try db.cachedStatement(
                """
                SELECT r.path, r.version, l.version,
                       l.kind = r.kind AND l.deleted = r.deleted AND (l.deleted = 1 OR (l.mode = r.mode AND l.size = r.size
                       AND l.root_hash IS r.root_hash AND l.symlink_target IS r.symlink_target
                       AND (l.kind <> 'file' OR l.mtime_ns = r.mtime_ns)))
                FROM remote_files AS r JOIN files AS l ON l.folder_id = r.folder_id AND l.path = r.path
                WHERE r.folder_id = ? AND r.device_id = ? AND r.path IN (\(Array(repeating: "?", count: group).joined(separator: ", ")))
                """)
            var echoed = Set<Key>()
            var values: [SQLValue] = [.text(folderID), .text(deviceID)]
            for start in stride(from: 0, to: list.count, by: group) {
                let slice = list[start..<min(start + group, list.count)]
                values.removeSubrange(2...)
                values += slice.map { .text($0) }
                values += repeatElement(.text(slice.last!), count: group - slice.count)
                try statement.bind(values)
                defer { statement.reset() }
                while try statement.step() {
                    guard let path = statement.string(at: 0), let theirs = statement.string(at: 1),
                          let ours = statement.string(at: 2) else { continue }
                    let same = statement.int64(at: 3) == 1
                    // Equal texts are equal versions (the common case: nothing to decode).
                    if theirs == ours {
                        if same { echoed.insert(key(path)) }
                        continue
                    }
                    guard let theirs = VersionVector(json: theirs), let ours = VersionVector(json: ours) else { continue }
                    switch theirs.compare(ours) {
                    case .lesser: echoed.insert(key(path))
                    case .equal where same: echoed.insert(key(path))
                    default: break
                    }
                }
            }
            return echoed
        }
    }

    /// Paths per statement of `echoedPaths` (SQLite allows 32,766 parameters).
    static let echoGroup = 64

    /// For each hash, where live local files (any folder) hold a chunk with it (at most
    /// `limit` each); hashes found nowhere are left out.
    package func localChunkLocations(hashes: some Sequence<[UInt8]>, limit: Int = 4) throws(IndexError) -> [[UInt8]: [ChunkLocation]] {
        let list = Array(Set(hashes))
        return try readTransaction { db in
            let statement = try db.cachedStatement(
                """
                SELECT f.folder_id, f.path, c.offset, c.size FROM file_chunks AS c JOIN files AS f USING (file_id)
                WHERE c.hash = ? AND f.deleted = 0 ORDER BY f.file_id, c.chunk_index LIMIT ?
                """)
            var result: [[UInt8]: [ChunkLocation]] = [:]
            for hash in try Self.presentHashes(list, db) {
                try statement.bind([.blob(hash), .integer(Int64(limit))])
                defer { statement.reset() }
                while try statement.step() {
                    result[hash, default: []].append(ChunkLocation(folderID: statement.string(at: 0) ?? "", path: statement.string(at: 1) ?? "",
                                                                   offset: statement.int64(at: 2) ?? 0, size: statement.int64(at: 3) ?? 0))
                }
            }
            return result
        }
    }

    /// Hashes asked for at once by `presentHashes`.
    static let hashesPerQuery = 64

    /// Those of `hashes` that some chunk row has, found `hashesPerQuery` at a time from the
    /// hash index alone: most chunks a pull wants are new (B: 10,000 lookups that find
    /// nothing), and one statement per hash cost ~3 µs where one per 64 costs ~1 µs a hash.
    static func presentHashes(_ hashes: [[UInt8]], _ db: Database) throws -> [[UInt8]] {
        let full = try db.cachedStatement("SELECT DISTINCT hash FROM file_chunks WHERE hash IN (" +
                                          repeatElement("?", count: hashesPerQuery).joined(separator: ", ") + ")")
        var present: [[UInt8]] = []
        for first in stride(from: 0, to: hashes.count, by: hashesPerQuery) {
            let group = hashes[first..<min(hashes.count, first + hashesPerQuery)]
            // The last group is padded with its first hash (found at most once: DISTINCT).
            for n in 0..<hashesPerQuery {
                try full.bind(.blob(n < group.count ? group[group.startIndex + n] : group[group.startIndex]), at: n + 1)
            }
            defer { full.reset() }
            while try full.step() {
                if let hash = full.blob(at: 0) { present.append(hash) }
            }
        }
        return present
    }
}
