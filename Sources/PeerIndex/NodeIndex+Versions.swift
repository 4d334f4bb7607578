package import PeerModel

/// One kept version of a file (a row of `versions` with its `version_chunks`).
package struct VersionRecord: Sendable, Equatable {
    /// Row ID (0 before it is stored).
    package var id: Int64
    package var folderID: String
    /// Path relative to the folder root, '/'-separated.
    package var path: String
    package var version: VersionVector
    package var size: Int64
    package var mtimeNs: Int64
    package var mode: UInt32
    /// Device ID that wrote this content.
    package var modifiedBy: String
    /// When it was replaced and kept (unix ms).
    package var keptAt: Int64
    /// What replaced it: `peer-edit`, `peer-delete`, `local-edit`, `local-delete`, `conflict`, `verify`, `restore`.
    package var reason: String
    package var rootHash: [UInt8]
    /// Every chunk is in the store (false: known here, held elsewhere maybe).
    package var held: Bool
    /// The chunk list (empty when not loaded).
    package var chunks: [FileChunkRecord]

    package init(id: Int64 = 0, folderID: String, path: String, version: VersionVector, size: Int64, mtimeNs: Int64,
                mode: UInt32, modifiedBy: String, keptAt: Int64, reason: String, rootHash: [UInt8], held: Bool,
                chunks: [FileChunkRecord]) {
        (self.id, self.folderID, self.path, self.version, self.size, self.mtimeNs) = (id, folderID, path, version, size, mtimeNs)
        (self.mode, self.modifiedBy, self.keptAt, self.reason, self.rootHash, self.held, self.chunks) =
            (mode, modifiedBy, keptAt, reason, rootHash, held, chunks)
    }
}

/// The versions store's metadata (`versions`, `version_chunks`, migration 0009).
extension NodeIndex {
    /// Stores a version with its chunks; its row ID. The same content of the same path kept
    /// again (same root hash and version vector) is not stored twice: the existing row's ID.
    @discardableResult
    package func addVersion(_ record: VersionRecord) throws(IndexError) -> Int64 {
        try addVersions([record])[0]
    }

    /// `addVersion` for many, in one transaction (a scan that finds 100,000 files deleted
    /// records their versions in one write, not 100,000).
    @discardableResult
    package func addVersions(_ records: [VersionRecord]) throws(IndexError) -> [Int64] {
        guard !records.isEmpty else { return [] }
        return try write { db in try Self.insertVersions(records, db) }
    }

    /// `addVersions`' rows, inside the caller's transaction.
    static func insertVersions(_ records: [VersionRecord], _ db: Database) throws(IndexError) -> [Int64] {
        let vectors = records.map { $0.version.json }
        let same = try db.cachedStatement(
            "SELECT version_id, held FROM versions WHERE folder_id = ? AND path = ? AND root_hash = ? AND version = ? LIMIT 1")
        let hold = try db.cachedStatement("UPDATE versions SET held = 1 WHERE version_id = ?")
        let insert = try db.cachedStatement(
            """
            INSERT INTO versions (folder_id, path, version, size, mtime_ns, mode, modified_by, kept_at, reason, root_hash, held)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        let insertChunk = try db.cachedStatement(
            "INSERT INTO version_chunks (version_id, chunk_index, offset, size, hash) VALUES (?, ?, ?, ?, ?)")
        var ids: [Int64] = []
        for (record, vector) in zip(records, vectors) {
            try same.bind([.text(record.folderID), .text(record.path), .blob(record.rootHash), .text(vector)])
            if try same.step(), let id = same.int64(at: 0) {
                let held = same.int64(at: 1) == 1
                same.reset()
                if record.held, !held {
                    try hold.bind([.integer(id)])
                    try hold.execute()
                }
                ids.append(id)
                continue
            }
            same.reset()
            try insert.bind([.text(record.folderID), .text(record.path), .text(vector), .integer(record.size), .integer(record.mtimeNs),
                             .integer(Int64(record.mode)), .text(record.modifiedBy), .integer(record.keptAt), .text(record.reason),
                             .blob(record.rootHash), SQLValue(record.held)])
            try insert.execute()
            let id = db.lastInsertRowID
            for (n, chunk) in record.chunks.enumerated() {
                try insertChunk.bind([.integer(id), .integer(Int64(n)), .integer(chunk.offset), .integer(chunk.size), .blob(chunk.hash)])
                try insertChunk.execute()
            }
            ids.append(id)
        }
        return ids
    }

    /// Versions of the folder at `path` or, with `underPrefix`, at any path under it
    /// (`path/…`), newest first, at most `limit`, starting after the version `before` (an
    /// ID from the previous page; nil: from the newest). Chunks are not loaded.
    package func versions(folderID: String, path: String, underPrefix: Bool = false, before: Int64? = nil,
                         limit: Int) throws(IndexError) -> [VersionRecord] {
        // Under a prefix: "p/…" sorts from "p/" to before "p0" ('0' follows '/'), a range of
        // the (folder_id, path) index; "" is the whole folder.
        let pathTest = !underPrefix ? "path = ?3" : path.isEmpty ? "?3 = ''"
            : "(path = ?3 OR (path >= ?3 || '/' AND path < ?3 || '0'))"
        return try read { db in
            try db.query(
                """
                SELECT * FROM versions WHERE folder_id = ?1 AND \(pathTest) AND version_id < ?2
                ORDER BY version_id DESC LIMIT ?4
                """, [.text(folderID), .integer(before ?? Int64.max), .text(path), .integer(Int64(max(0, limit)))])
                .map { row throws(IndexError) in try Self.versionRecord(row) }
        }
    }

    /// One version with its chunks; nil when there is none with that ID in the folder.
    package func version(folderID: String, id: Int64) throws(IndexError) -> VersionRecord? {
        try read { db in
            guard let row = try db.query("SELECT * FROM versions WHERE version_id = ? AND folder_id = ?",
                                         [.integer(id), .text(folderID)]).first else { return nil }
            var record = try Self.versionRecord(row)
            record.chunks = try db.query("SELECT offset, size, hash FROM version_chunks WHERE version_id = ? ORDER BY chunk_index",
                                         [.integer(id)]).map { row throws(IndexError) in
                FileChunkRecord(offset: try row.int64("offset"), size: try row.int64("size"), hash: try row.blob("hash"))
            }
            return record
        }
    }

    /// Every version of the folder as expiry needs it (ID, path, kept at, size), oldest first.
    package func versionAges(folderID: String) throws(IndexError) -> [(id: Int64, path: String, keptAt: Int64, size: Int64)] {
        try read { db in
            try db.query("SELECT version_id, path, kept_at, size FROM versions WHERE folder_id = ? ORDER BY kept_at, version_id",
                         [.text(folderID)]).map { row throws(IndexError) in
                (try row.int64("version_id"), try row.string("path"), try row.int64("kept_at"), try row.int64("size"))
            }
        }
    }

    /// Removes versions; returns the chunk hashes they held that no version uses any more
    /// (the store's files to delete).
    package func removeVersions(_ ids: [Int64]) throws(IndexError) -> [[UInt8]] {
        guard !ids.isEmpty else { return [] }
        return try write { db in
            var freed: Set<[UInt8]> = []
            let chunks = try db.cachedStatement("SELECT hash FROM version_chunks WHERE version_id = ?")
            let remove = try db.cachedStatement("DELETE FROM versions WHERE version_id = ?")
            let used = try db.cachedStatement("SELECT 1 FROM version_chunks WHERE hash = ? LIMIT 1")
            var candidates: Set<[UInt8]> = []
            for id in ids {
                try chunks.bind([.integer(id)])
                while try chunks.step() { if let hash = chunks.blob(at: 0) { candidates.insert(hash) } }
                chunks.reset()
                try remove.bind([.integer(id)])
                try remove.execute()
            }
            for hash in candidates {
                try used.bind([.blob(hash)])
                let stillUsed = try used.step()
                used.reset()
                if !stillUsed { freed.insert(hash) }
            }
            return Array(freed)
        }
    }

    /// Those of `hashes` no version uses (a chunk file whose removal failed is removed later
    /// only if no version took it up meanwhile).
    package func unusedVersionChunks(_ hashes: [[UInt8]]) throws(IndexError) -> [[UInt8]] {
        guard !hashes.isEmpty else { return [] }
        return try read { db in
            let used = try db.cachedStatement("SELECT 1 FROM version_chunks WHERE hash = ? LIMIT 1")
            return try hashes.filter { hash in
                try used.bind([.blob(hash)])
                defer { used.reset() }
                return try !used.step()
            }
        }
    }

    /// Whether a version of `path` in the folder has a chunk of exactly this offset, size and
    /// hash and is held here: the only version block a member may be sent.
    package func hasVersionChunk(folderID: String, path filePath: String, offset: Int64, size: Int64,
                                hash: [UInt8]) throws(IndexError) -> Bool {
        try read { db in
            try !db.query(
                """
                SELECT 1 FROM versions v JOIN version_chunks c ON c.version_id = v.version_id
                WHERE v.folder_id = ? AND v.path = ? AND v.held = 1 AND c.hash = ? AND c.offset = ? AND c.size = ? LIMIT 1
                """, [.text(folderID), .text(filePath), .blob(hash), .integer(offset), .integer(size)]).isEmpty
        }
    }

    /// Marks versions not held (their chunks were found missing or damaged in the store).
    package func setVersionsNotHeld(holding hash: [UInt8]) throws(IndexError) {
        try write { db in
            try db.execute(
                "UPDATE versions SET held = 0 WHERE version_id IN (SELECT version_id FROM version_chunks WHERE hash = ?)",
                [.blob(hash)])
        }
    }

    private static func versionRecord(_ row: Row) throws(IndexError) -> VersionRecord {
        VersionRecord(id: try row.int64("version_id"), folderID: try row.string("folder_id"), path: try row.string("path"),
                      version: VersionVector(json: try row.string("version")) ?? [:], size: try row.int64("size"),
                      mtimeNs: try row.int64("mtime_ns"), mode: UInt32(clamping: try row.int64("mode")),
                      modifiedBy: try row.string("modified_by"), keptAt: try row.int64("kept_at"), reason: try row.string("reason"),
                      rootHash: try row.blob("root_hash"), held: try row.bool("held"), chunks: [])
    }
}
