/// Where a pack holds a chunk (`version_pack_chunks`, migration 0013).
package struct PackLocation: Sendable, Equatable {
    /// The pack's file name under versions/.packs.
    package var name: String
    package var offset: Int64
    package var size: Int64

    package init(name: String, offset: Int64, size: Int64) {
        (self.name, self.offset, self.size) = (name, offset, size)
    }
}

/// Versions kept as packs (`version_packs`, `version_pack_chunks`, migration 0013): a replaced
/// file's inode adopted whole, read chunk by chunk at the offsets recorded here.
extension NodeIndex {
    /// Records the pack `name` (`size` bytes) holding `record`'s chunks at their offsets, and
    /// the version itself, in one transaction: the version is never recorded without its pack,
    /// nor the pack without a version using it. The version's ID.
    package func addPackedVersion(_ record: VersionRecord, pack name: String, size: Int64, addedAt: Int64) throws(IndexError) -> Int64 {
        try write { db in
            try db.execute("INSERT INTO version_packs (name, size, added_at) VALUES (?, ?, ?)",
                           [.text(name), .integer(size), .integer(addedAt)])
            let pack = db.lastInsertRowID
            let insert = try db.cachedStatement(
                "INSERT OR IGNORE INTO version_pack_chunks (hash, pack_id, offset, size) VALUES (?, ?, ?, ?)")
            for chunk in record.chunks {
                try insert.bind([.blob(chunk.hash), .integer(pack), .integer(chunk.offset), .integer(chunk.size)])
                try insert.execute()
            }
            return try Self.insertVersions([record], db)[0]
        }
    }

    /// The packs holding the chunk `hash` (at most a few: a chunk is adopted again only with a
    /// file the store lacked most of).
    package func packLocations(of hash: [UInt8]) throws(IndexError) -> [PackLocation] {
        try read { db in
            try db.query(
                """
                SELECT p.name, c.offset, c.size FROM version_pack_chunks c JOIN version_packs p ON p.pack_id = c.pack_id
                WHERE c.hash = ? LIMIT 16
                """, [.blob(hash)]).map { row throws(IndexError) in
                PackLocation(name: try row.string("name"), offset: try row.int64("offset"), size: try row.int64("size"))
            }
        }
    }

    /// Those of `hashes` that some pack holds (one read for a whole chunk list).
    package func packedHashes(_ hashes: [[UInt8]]) throws(IndexError) -> Set<[UInt8]> {
        guard !hashes.isEmpty else { return [] }
        return try read { db in
            let held = try db.cachedStatement("SELECT 1 FROM version_pack_chunks WHERE hash = ? LIMIT 1")
            var out = Set<[UInt8]>()
            for hash in hashes {
                try held.bind([.blob(hash)])
                if try held.step() { out.insert(hash) }
                held.reset()
            }
            return out
        }
    }

    /// Forgets that the pack `name` holds `hash` (its bytes there no longer verify).
    package func removePackLocation(name: String, hash: [UInt8]) throws(IndexError) {
        try write { db in
            try db.execute(
                "DELETE FROM version_pack_chunks WHERE hash = ? AND pack_id = (SELECT pack_id FROM version_packs WHERE name = ?)",
                [.blob(hash), .text(name)])
        }
    }

    /// Every pack's name (a pack file no row names is an orphan of a crash).
    package func packNames() throws(IndexError) -> Set<String> {
        try read { db in
            Set(try db.query("SELECT name FROM version_packs").map { row throws(IndexError) in try row.string("name") })
        }
    }

    /// Removes the packs no kept version uses any chunk of; their names (the files to delete).
    package func removeUnreferencedPacks() throws(IndexError) -> [String] {
        try write { db in
            let rows = try db.query(
                """
                SELECT p.pack_id, p.name FROM version_packs p WHERE NOT EXISTS (
                    SELECT 1 FROM version_pack_chunks c JOIN version_chunks v ON v.hash = c.hash WHERE c.pack_id = p.pack_id)
                """)
            var names: [String] = []
            for row in rows {
                try db.execute("DELETE FROM version_packs WHERE pack_id = ?", [.integer(try row.int64("pack_id"))])
                names.append(try row.string("name"))
            }
            return names
        }
    }

    /// Removes the packs `names` (their files are gone); the chunk hashes they held.
    package func removePacks(_ names: [String]) throws(IndexError) -> [[UInt8]] {
        guard !names.isEmpty else { return [] }
        return try write { db in
            var hashes = Set<[UInt8]>()
            for name in names {
                for row in try db.query(
                    "SELECT c.hash FROM version_pack_chunks c JOIN version_packs p ON p.pack_id = c.pack_id WHERE p.name = ?",
                    [.text(name)]) {
                    hashes.insert(try row.blob("hash"))
                }
                try db.execute("DELETE FROM version_packs WHERE name = ?", [.text(name)])
            }
            return Array(hashes)
        }
    }

    /// Marks not held the versions using any of `hashes` (chunks no longer held anywhere here).
    package func setVersionsNotHeld(holdingAny hashes: [[UInt8]]) throws(IndexError) {
        guard !hashes.isEmpty else { return }
        try write { db in
            let update = try db.cachedStatement(
                "UPDATE versions SET held = 0 WHERE version_id IN (SELECT version_id FROM version_chunks WHERE hash = ?)")
            for hash in hashes {
                try update.bind([.blob(hash)])
                try update.execute()
            }
        }
    }
}
