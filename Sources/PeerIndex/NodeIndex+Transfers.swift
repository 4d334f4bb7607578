/// Transfers: offers, manifests, verified chunks — what survives a crash for resume.
extension NodeIndex {
    private static let transferColumns = """
        transfer_id, direction, device_id, name, size, mode, mtime_ns, root_hash, chunk_count, state,
        partial_path, final_path, bytes_done, error, created_at, updated_at
        """

    /// Records a new transfer and its manifest in one transaction.
    /// `chunks` must hold exactly `transfer.chunkCount` chunks, indexed 0 ..< chunkCount.
    package func insertTransfer(_ transfer: TransferRecord, chunks: [TransferChunk]) throws(IndexError) {
        let path = self.path
        guard chunks.count == transfer.chunkCount,
              chunks.enumerated().allSatisfy({ $0.offset == $0.element.index })
        else {
            throw IndexError(kind: .unexpectedValue, operation: "insert transfer", path: path,
                             message: "transfer \(transfer.id) declares \(transfer.chunkCount) chunks but \(chunks.count) were given, or they are not numbered 0, 1, 2, …")
        }
        try write { db in
            try db.execute(
                "INSERT INTO transfers (\(Self.transferColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [.text(transfer.id), .text(transfer.direction.rawValue), .text(transfer.deviceID), .text(transfer.name),
                 .integer(transfer.size), .integer(Int64(transfer.mode)), .integer(transfer.mtimeNs),
                 .blob(transfer.rootHash), .integer(Int64(transfer.chunkCount)), .text(transfer.state.rawValue),
                 SQLValue(transfer.partialPath), SQLValue(transfer.finalPath), .integer(transfer.bytesDone),
                 SQLValue(transfer.error), .integer(transfer.createdAt), .integer(transfer.updatedAt)])
            let insert = try db.cachedStatement(
                "INSERT INTO transfer_chunks (transfer_id, chunk_index, offset, size, hash, verified) VALUES (?, ?, ?, ?, ?, ?)")
            for chunk in chunks {
                try insert.bind([.text(transfer.id), .integer(Int64(chunk.index)), .integer(chunk.offset),
                                 .integer(chunk.size), .blob(chunk.hash), SQLValue(chunk.verified)])
                try insert.execute()
            }
        }
    }

    /// Adds chunk rows of a transfer whose manifest streams, as its chunks become known, and
    /// sets its chunk count (and root hash, once every chunk is known). A row the transfer
    /// has already is replaced, and keeps its verified mark only if it names the same chunk
    /// (offset, size, hash): a resumed offer that differs is never trusted for old rows.
    package func addTransferChunks(transferID: String, chunks: [TransferChunk], chunkCount: Int,
                                  rootHash: [UInt8]?) throws(IndexError) {
        let path = self.path
        try write { db in
            let upsert = try db.cachedStatement(
                """
                INSERT INTO transfer_chunks (transfer_id, chunk_index, offset, size, hash, verified) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (transfer_id, chunk_index) DO UPDATE SET
                    verified = verified AND offset = excluded.offset AND size = excluded.size AND hash = excluded.hash,
                    offset = excluded.offset, size = excluded.size, hash = excluded.hash
                """)
            for chunk in chunks {
                try upsert.bind([.text(transferID), .integer(Int64(chunk.index)), .integer(chunk.offset),
                                 .integer(chunk.size), .blob(chunk.hash), SQLValue(chunk.verified)])
                try upsert.execute()
            }
            if let rootHash {
                try db.execute("UPDATE transfers SET chunk_count = ?, root_hash = ? WHERE transfer_id = ?",
                               [.integer(Int64(chunkCount)), .blob(rootHash), .text(transferID)])
            } else {
                try db.execute("UPDATE transfers SET chunk_count = ? WHERE transfer_id = ?",
                               [.integer(Int64(chunkCount)), .text(transferID)])
            }
            guard db.changes == 1 else { throw Self.noTransfer(transferID, path: path, operation: "add transfer chunks") }
        }
    }

    /// The transfer with `id`, or nil.
    package func transfer(id: String) throws(IndexError) -> TransferRecord? {
        try read { db in
            try db.query("SELECT \(Self.transferColumns) FROM transfers WHERE transfer_id = ?", [.text(id)])
                .first.map(Self.transferRecord)
        }
    }

    /// All transfers, or those with one peer, oldest first.
    package func transfers(deviceID: String? = nil) throws(IndexError) -> [TransferRecord] {
        try read { db in
            let rows = if let deviceID {
                try db.query("SELECT \(Self.transferColumns) FROM transfers WHERE device_id = ? ORDER BY created_at, transfer_id",
                             [.text(deviceID)])
            } else {
                try db.query("SELECT \(Self.transferColumns) FROM transfers ORDER BY created_at, transfer_id")
            }
            return try rows.map(Self.transferRecord)
        }
    }

    /// The newest unfinished transfer of the same content with the same peer in the same
    /// direction, if any: sending a file again continues it instead of starting over.
    package func resumableTransfer(deviceID: String, rootHash: [UInt8], direction: TransferRecord.Direction) throws(IndexError) -> TransferRecord? {
        try read { db in
            try db.query(
                """
                SELECT \(Self.transferColumns) FROM transfers
                WHERE device_id = ? AND root_hash = ? AND direction = ? AND state IN ('offered', 'active', 'paused')
                ORDER BY created_at DESC, transfer_id LIMIT 1
                """,
                [.text(deviceID), .blob(rootHash), .text(direction.rawValue)]
            ).first.map(Self.transferRecord)
        }
    }

    /// Moves a transfer to `state`, recording `error` (nil clears it) and the time.
    package func updateTransferState(id: String, to state: TransferRecord.State, error: String? = nil) throws(IndexError) {
        let path = self.path
        let now = clock()
        try write { db in
            try db.execute("UPDATE transfers SET state = ?, error = ?, updated_at = ? WHERE transfer_id = ?",
                           [.text(state.rawValue), SQLValue(error), .integer(now), .text(id)])
            guard db.changes == 1 else { throw Self.noTransfer(id, path: path, operation: "update transfer state") }
        }
    }

    /// Records where a received transfer was put (its final file or folder).
    package func setTransferFinalPath(id: String, path finalPath: String) throws(IndexError) {
        let path = self.path
        let now = clock()
        try write { db in
            try db.execute("UPDATE transfers SET final_path = ?, updated_at = ? WHERE transfer_id = ?",
                           [.text(finalPath), .integer(now), .text(id)])
            guard db.changes == 1 else { throw Self.noTransfer(id, path: path, operation: "set transfer final path") }
        }
    }

    /// Deletes a transfer; its chunks go with it (ON DELETE CASCADE). Returns whether it existed.
    @discardableResult
    package func deleteTransfer(id: String) throws(IndexError) -> Bool {
        try write { db in
            try db.execute("DELETE FROM transfers WHERE transfer_id = ?", [.text(id)])
            return db.changes > 0
        }
    }

    /// Deletes finished transfers (completed, failed, cancelled) last changed before `cutoff`
    /// (unix ms), and those beyond the newest `keep` finished ones; their chunks go with them.
    /// Unfinished transfers (offered, active, paused: resumable) are never deleted. Returns
    /// how many went.
    @discardableResult
    package func pruneFinishedTransfers(changedBefore cutoff: Int64, keepingNewest keep: Int) throws(IndexError) -> Int {
        try write { db in
            try db.execute(
                """
                DELETE FROM transfers WHERE state IN ('completed', 'failed', 'cancelled') AND (updated_at < ? OR transfer_id NOT IN (
                    SELECT transfer_id FROM transfers WHERE state IN ('completed', 'failed', 'cancelled')
                    ORDER BY updated_at DESC, transfer_id LIMIT ?))
                """,
                [.integer(cutoff), .integer(Int64(max(0, keep)))])
            return db.changes
        }
    }

    /// The manifest of a transfer, in chunk order.
    package func transferChunks(transferID: String) throws(IndexError) -> [TransferChunk] {
        try read { db in
            try db.query(
                "SELECT chunk_index, offset, size, hash, verified FROM transfer_chunks WHERE transfer_id = ? ORDER BY chunk_index",
                [.text(transferID)]
            ).map { row in
                TransferChunk(index: try row.int("chunk_index"), offset: try row.int64("offset"), size: try row.int64("size"),
                              hash: try row.blob("hash"), verified: try row.bool("verified"))
            }
        }
    }

    /// Marks chunks verified, all in one transaction (call it per batch of received
    /// chunks, not per chunk), and updates `bytesDone` and `updatedAt`. An index the
    /// manifest does not have fails the whole batch with `.notFound`.
    package func markChunksVerified(transferID: String, indices: some Sequence<Int>) throws(IndexError) {
        let path = self.path
        let now = clock()
        let indices = Array(indices)
        try write { db in
            let update = try db.cachedStatement(
                "UPDATE transfer_chunks SET verified = 1 WHERE transfer_id = ? AND chunk_index = ?")
            try update.bind(.text(transferID), at: 1)
            for index in indices {
                try update.bind(.integer(Int64(index)), at: 2)
                try update.execute()
                if db.changes == 0 {
                    throw IndexError(kind: .notFound, operation: "mark chunks verified", path: path,
                                     message: "transfer \(transferID) has no chunk \(index)")
                }
            }
            try db.execute(
                """
                UPDATE transfers SET updated_at = ?1,
                    bytes_done = (SELECT coalesce(sum(size), 0) FROM transfer_chunks WHERE transfer_id = ?2 AND verified = 1)
                WHERE transfer_id = ?2
                """,
                [.integer(now), .text(transferID)])
            guard db.changes == 1 else { throw Self.noTransfer(transferID, path: path, operation: "mark chunks verified") }
        }
    }

    /// Indices of the chunks verified so far (what a receiver reports when it accepts a resumed offer).
    package func verifiedChunks(transferID: String) throws(IndexError) -> Set<Int> {
        try read { db in
            Set(try db.query("SELECT chunk_index FROM transfer_chunks WHERE transfer_id = ? AND verified = 1",
                             [.text(transferID)]).map { try $0.int("chunk_index") })
        }
    }

    private static func transferRecord(_ row: Row) throws -> TransferRecord {
        func decode<E: RawRepresentable<String>>(_ type: E.Type, _ column: String) throws -> E {
            let text = try row.string(column)
            guard let value = E(rawValue: text) else {
                throw IndexError(kind: .unexpectedValue, operation: "read transfer", path: row.path,
                                 message: "unknown \(column) value \(text)")
            }
            return value
        }
        return TransferRecord(
            id: try row.string("transfer_id"), direction: try decode(TransferRecord.Direction.self, "direction"),
            deviceID: try row.string("device_id"), name: try row.string("name"), size: try row.int64("size"),
            mode: UInt32(truncatingIfNeeded: try row.int64("mode")), mtimeNs: try row.int64("mtime_ns"),
            rootHash: try row.blob("root_hash"), chunkCount: try row.int("chunk_count"),
            state: try decode(TransferRecord.State.self, "state"), partialPath: try row.optionalString("partial_path"),
            finalPath: try row.optionalString("final_path"), bytesDone: try row.int64("bytes_done"),
            error: try row.optionalString("error"), createdAt: try row.int64("created_at"),
            updatedAt: try row.int64("updated_at"))
    }

    private static func noTransfer(_ id: String, path: String, operation: String) -> IndexError {
        IndexError(kind: .notFound, operation: operation, path: path, message: "no transfer with ID \(id)")
    }
}
