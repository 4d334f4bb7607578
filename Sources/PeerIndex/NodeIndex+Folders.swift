/// Folders, the peers they are shared with, and folder offers received.
///
/// Removing a folder removes its local index (files, chunks), its peers and what they
/// told us (remote_files), by ON DELETE CASCADE. The runtime state of a folder (scanning,
/// syncing, idle) is not stored; only an error that stops it is (`setFolderError`).
extension NodeIndex {
    private static let folderColumns =
        "folder_id, path, label, created_at, paused, error, error_at, max_sequence, index_id, root_device, root_inode"
    private static let folderPeerColumns =
        "folder_id, device_id, acked_sequence, received_sequence, remote_index_id"

    // MARK: Folders

    /// Adds a folder with a new random index ID. A folder ID or path already present
    /// fails with SQLITE_CONSTRAINT_PRIMARYKEY / _UNIQUE and changes nothing.
    @discardableResult
    package func addFolder(id: String, path folderPath: String, label: String = "") throws(IndexError) -> FolderRecord {
        try addFolder(id: id, path: folderPath, label: label, sharedWith: [])
    }

    /// Adds a folder (as `addFolder`) shared with `peers` and, for an accepted offer
    /// (`removingOffers`), forgets the offers of its ID: all in one transaction. A crash
    /// leaves all of it or none of it, never a folder that no peer shares (which would not
    /// sync, and, being a folder we have, would not be accepted automatically again).
    /// An unknown peer (or a taken ID or path) fails and changes nothing.
    @discardableResult
    package func addFolder(id: String, path folderPath: String, label: String = "", sharedWith peers: [String],
                          removingOffers: Bool = false) throws(IndexError) -> FolderRecord {
        let record = FolderRecord(id: id, path: folderPath, label: label, createdAt: clock(),
                                  indexID: Int64.random(in: 1...Int64.max))
        try write { db in
            try db.execute(
                "INSERT INTO folders (folder_id, path, label, created_at, paused, index_id) VALUES (?, ?, ?, ?, 0, ?)",
                [.text(record.id), .text(record.path), .text(record.label), .integer(record.createdAt),
                 .integer(record.indexID)])
            try Self.insertFolderPeers(db, folderID: id, peers, removingOffers: removingOffers)
        }
        return record
    }

    /// All folders, by path.
    package func folders() throws(IndexError) -> [FolderRecord] {
        try read { db in try db.query("SELECT \(Self.folderColumns) FROM folders ORDER BY path").map(Self.folderRecord) }
    }

    /// The folder with `id`, or nil.
    package func folder(id: String) throws(IndexError) -> FolderRecord? {
        try read { db in
            try db.query("SELECT \(Self.folderColumns) FROM folders WHERE folder_id = ?", [.text(id)]).first.map(Self.folderRecord)
        }
    }

    /// The folder whose root is exactly `path`, or nil.
    package func folder(path folderPath: String) throws(IndexError) -> FolderRecord? {
        try read { db in
            try db.query("SELECT \(Self.folderColumns) FROM folders WHERE path = ?", [.text(folderPath)])
                .first.map(Self.folderRecord)
        }
    }

    /// Removes a folder and everything recorded about it. Returns whether it existed.
    @discardableResult
    package func removeFolder(id: String) throws(IndexError) -> Bool {
        try write { db in
            try db.execute("DELETE FROM folders WHERE folder_id = ?", [.text(id)])
            return db.changes > 0
        }
    }

    /// Pauses or resumes scanning and syncing of a folder.
    package func setFolderPaused(id: String, _ paused: Bool) throws(IndexError) {
        try updateFolder(id: id, operation: "set folder paused", sql: "UPDATE folders SET paused = ? WHERE folder_id = ?",
                         [SQLValue(paused), .text(id)])
    }

    /// Records why a folder stopped syncing (with the time), or clears it with nil.
    package func setFolderError(id: String, _ error: String?) throws(IndexError) {
        let now: Int64? = error == nil ? nil : clock()
        try updateFolder(id: id, operation: "set folder error",
                         sql: "UPDATE folders SET error = ?, error_at = ? WHERE folder_id = ?",
                         [SQLValue(error), SQLValue(now), .text(id)])
    }

    /// Records which directory the folder's root is (device and inode, both at once), or
    /// forgets it with nil. Stored as bit patterns: any 64-bit value round-trips.
    package func setFolderRoot(id: String, device: UInt64?, inode: UInt64?) throws(IndexError) {
        let both = device != nil && inode != nil
        try updateFolder(id: id, operation: "set folder root",
                         sql: "UPDATE folders SET root_device = ?, root_inode = ? WHERE folder_id = ?",
                         [SQLValue(both ? device.map { Int64(bitPattern: $0) } : nil),
                          SQLValue(both ? inode.map { Int64(bitPattern: $0) } : nil), .text(id)])
    }

    /// Folders whose stored chunk and root hashes are of an older function than protocol
    /// version 4's BLAKE3 (SHA-256, recorded before migration 0005, or BLAKE2b-256, before
    /// 0004): their records must be hashed again before the folder starts. Empty once every
    /// folder is done.
    package func foldersWithOldContentHashes() throws(IndexError) -> [String] {
        try read { db in
            try db.query("SELECT folder_id FROM folders WHERE content_function <> 'blake3' ORDER BY folder_id").map { try $0.string("folder_id") }
        }
    }

    /// Records that the folder's records were hashed again: each live file now carries
    /// BLAKE3 hashes, or stale ones its next scan replaces (see `foldersWithOldContentHashes`).
    package func markContentHashesCurrent(folderID: String) throws(IndexError) {
        try updateFolder(id: folderID, operation: "mark content hashes current",
                         sql: "UPDATE folders SET content_function = 'blake3' WHERE folder_id = ?", [.text(folderID)])
    }

    /// Highest local sequence ever assigned in the folder (what index updates count up to).
    package func maxSequence(folderID: String) throws(IndexError) -> Int64 {
        let path = self.path
        return try read { db in
            guard let row = try db.query("SELECT max_sequence FROM folders WHERE folder_id = ?", [.text(folderID)]).first else {
                throw Self.noFolder(folderID, path: path, operation: "read max sequence")
            }
            return try row.int64("max_sequence")
        }
    }

    // MARK: Folder peers

    /// Shares a folder with a known peer. Idempotent: an existing share keeps its sequences.
    package func addFolderPeer(folderID: String, deviceID: String) throws(IndexError) {
        try write { db in
            try db.execute("INSERT INTO folder_peers (folder_id, device_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                           [.text(folderID), .text(deviceID)])
        }
    }

    /// Shares a folder with several known peers and, for an accepted offer
    /// (`removingOffers`), forgets the offers of its ID, in one transaction (all or nothing).
    /// Idempotent as `addFolderPeer`.
    package func addFolderPeers(folderID: String, deviceIDs: [String], removingOffers: Bool = false) throws(IndexError) {
        try write { db in try Self.insertFolderPeers(db, folderID: folderID, deviceIDs, removingOffers: removingOffers) }
    }

    private static func insertFolderPeers(_ db: Database, folderID: String, _ deviceIDs: [String], removingOffers: Bool) throws {
        for device in deviceIDs {
            try db.execute("INSERT INTO folder_peers (folder_id, device_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                           [.text(folderID), .text(device)])
        }
        if removingOffers { try db.execute("DELETE FROM folder_offers WHERE folder_id = ?", [.text(folderID)]) }
    }

    /// Stops sharing a folder with a peer; what it told us goes too. Returns whether it was shared.
    @discardableResult
    package func removeFolderPeer(folderID: String, deviceID: String) throws(IndexError) -> Bool {
        try write { db in
            try db.execute("DELETE FROM folder_peers WHERE folder_id = ? AND device_id = ?", [.text(folderID), .text(deviceID)])
            return db.changes > 0
        }
    }

    /// The peers of a folder, by device ID.
    package func folderPeers(folderID: String) throws(IndexError) -> [FolderPeerRecord] {
        try read { db in
            try db.query("SELECT \(Self.folderPeerColumns) FROM folder_peers WHERE folder_id = ? ORDER BY device_id",
                         [.text(folderID)]).map(Self.folderPeerRecord)
        }
    }

    /// One folder share, or nil when the folder is not shared with the device.
    package func folderPeer(folderID: String, deviceID: String) throws(IndexError) -> FolderPeerRecord? {
        try read { db in
            try db.query("SELECT \(Self.folderPeerColumns) FROM folder_peers WHERE folder_id = ? AND device_id = ?",
                         [.text(folderID), .text(deviceID)]).first.map(Self.folderPeerRecord)
        }
    }

    /// IDs of the folders shared with a device, sorted: the only folders it may learn about.
    package func folderIDs(sharedWith deviceID: String) throws(IndexError) -> [String] {
        try read { db in
            try db.query("SELECT folder_id FROM folder_peers WHERE device_id = ? ORDER BY folder_id", [.text(deviceID)])
                .map { try $0.string("folder_id") }
        }
    }

    /// Records the highest of our sequences the peer acknowledged.
    package func setAckedSequence(folderID: String, deviceID: String, _ sequence: Int64) throws(IndexError) {
        try updateFolderPeer(folderID: folderID, deviceID: deviceID, operation: "set acked sequence",
                             sql: "UPDATE folder_peers SET acked_sequence = ? WHERE folder_id = ? AND device_id = ?",
                             [.integer(sequence), .text(folderID), .text(deviceID)])
    }

    /// Records the highest of the peer's sequences we received. Prefer passing
    /// `receivedSequence` to `upsertRemoteFiles`, which does it in the same transaction.
    package func setReceivedSequence(folderID: String, deviceID: String, _ sequence: Int64) throws(IndexError) {
        try updateFolderPeer(folderID: folderID, deviceID: deviceID, operation: "set received sequence",
                             sql: "UPDATE folder_peers SET received_sequence = ? WHERE folder_id = ? AND device_id = ?",
                             [.integer(sequence), .text(folderID), .text(deviceID)])
    }

    /// The peer announced index `indexID` for the folder. When it differs from the one
    /// `receivedSequence` counts in (its index was reset, or this is the first exchange),
    /// forgets its remote files and starts again from sequence 0, in one transaction.
    /// Returns whether it reset.
    @discardableResult
    package func noteRemoteIndexID(folderID: String, deviceID: String, indexID: Int64) throws(IndexError) -> Bool {
        let path = self.path
        return try write { db in
            guard let row = try db.query("SELECT remote_index_id FROM folder_peers WHERE folder_id = ? AND device_id = ?",
                                         [.text(folderID), .text(deviceID)]).first else {
                throw Self.noFolderPeer(folderID, deviceID, path: path, operation: "note remote index ID")
            }
            if try row.int64("remote_index_id") == indexID { return false }
            try db.execute("DELETE FROM remote_files WHERE folder_id = ? AND device_id = ?", [.text(folderID), .text(deviceID)])
            try db.execute(
                "UPDATE folder_peers SET remote_index_id = ?, received_sequence = 0 WHERE folder_id = ? AND device_id = ?",
                [.integer(indexID), .text(folderID), .text(deviceID)])
            return true
        }
    }

    // MARK: Folder offers

    /// Records (or refreshes: label and time) a folder offer from a known peer.
    package func recordFolderOffer(folderID: String, deviceID: String, label: String) throws(IndexError) {
        let now = clock()
        try write { db in
            try db.execute(
                """
                INSERT INTO folder_offers (folder_id, device_id, label, offered_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (folder_id, device_id) DO UPDATE SET label = excluded.label, offered_at = excluded.offered_at
                """,
                [.text(folderID), .text(deviceID), .text(label), .integer(now)])
        }
    }

    /// Pending offers, all or of one folder ID, oldest first.
    package func folderOffers(folderID: String? = nil) throws(IndexError) -> [FolderOffer] {
        try read { db in
            let sql = "SELECT folder_id, device_id, label, offered_at FROM folder_offers"
            let rows = if let folderID {
                try db.query(sql + " WHERE folder_id = ? ORDER BY offered_at, device_id", [.text(folderID)])
            } else {
                try db.query(sql + " ORDER BY offered_at, folder_id, device_id")
            }
            return try rows.map { row in
                FolderOffer(folderID: try row.string("folder_id"), deviceID: try row.string("device_id"),
                            label: try row.string("label"), offeredAt: try row.int64("offered_at"))
            }
        }
    }

    /// How many offers from `deviceID` wait for an answer (its bound: `FolderService.maxShareOffers`).
    package func folderOfferCount(deviceID: String) throws(IndexError) -> Int {
        try read { db in
            try db.query("SELECT count(*) AS n FROM folder_offers WHERE device_id = ?", [.text(deviceID)]).first?.int("n") ?? 0
        }
    }

    /// Forgets the offers of a folder ID (accepted or declined), from one device or all. Returns how many.
    @discardableResult
    package func removeFolderOffers(folderID: String, deviceID: String? = nil) throws(IndexError) -> Int {
        try write { db in
            if let deviceID {
                try db.execute("DELETE FROM folder_offers WHERE folder_id = ? AND device_id = ?", [.text(folderID), .text(deviceID)])
            } else {
                try db.execute("DELETE FROM folder_offers WHERE folder_id = ?", [.text(folderID)])
            }
            return db.changes
        }
    }

    // MARK: Helpers

    private func updateFolder(id: String, operation: String, sql: String, _ bindings: [SQLValue]) throws(IndexError) {
        let path = self.path
        try write { db in
            try db.execute(sql, bindings)
            guard db.changes == 1 else { throw Self.noFolder(id, path: path, operation: operation) }
        }
    }

    private func updateFolderPeer(folderID: String, deviceID: String, operation: String, sql: String,
                                  _ bindings: [SQLValue]) throws(IndexError) {
        let path = self.path
        try write { db in
            try db.execute(sql, bindings)
            guard db.changes == 1 else { throw Self.noFolderPeer(folderID, deviceID, path: path, operation: operation) }
        }
    }

    static func noFolder(_ id: String, path: String, operation: String) -> IndexError {
        IndexError(kind: .notFound, operation: operation, path: path, message: "no folder with ID \(id)")
    }

    static func noFolderPeer(_ folderID: String, _ deviceID: String, path: String, operation: String) -> IndexError {
        IndexError(kind: .notFound, operation: operation, path: path,
                   message: "folder \(folderID) is not shared with device \(deviceID)")
    }

    private static func folderRecord(_ row: Row) throws -> FolderRecord {
        FolderRecord(
            id: try row.string("folder_id"), path: try row.string("path"), label: try row.string("label"),
            createdAt: try row.int64("created_at"), paused: try row.bool("paused"), error: try row.optionalString("error"),
            errorAt: try row.optionalInt64("error_at"), maxSequence: try row.int64("max_sequence"),
            indexID: try row.int64("index_id"), rootDevice: try row.optionalInt64("root_device").map(UInt64.init(bitPattern:)),
            rootInode: try row.optionalInt64("root_inode").map(UInt64.init(bitPattern:)))
    }

    private static func folderPeerRecord(_ row: Row) throws -> FolderPeerRecord {
        FolderPeerRecord(
            folderID: try row.string("folder_id"), deviceID: try row.string("device_id"),
            ackedSequence: try row.int64("acked_sequence"), receivedSequence: try row.int64("received_sequence"),
            remoteIndexID: try row.int64("remote_index_id"))
    }
}
