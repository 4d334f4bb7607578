import Foundation
import PeerIndex
import Testing

@Suite struct TransferTests {
    /// An index with peers 1 and 2.
    func indexWithPeers() throws -> NodeIndex {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        try index.upsertPeer(samplePeer(1))
        try index.upsertPeer(samplePeer(2))
        return index
    }

    @Test func transferAndManifestRoundTrip() throws {
        let index = try indexWithPeers()
        let (record, chunks) = sampleTransfer(id: "t1", peer: 1, chunkCount: 5)
        try index.insertTransfer(record, chunks: chunks)
        #expect(try index.transfer(id: "t1") == record)
        #expect(try index.transferChunks(transferID: "t1") == chunks)
        #expect(try index.transfer(id: "nope") == nil)
        #expect(try index.transfers().map(\.id) == ["t1"])
        #expect(try index.transfers(deviceID: deviceID(2)).isEmpty)
    }

    /// Finished transfers go when older than the cutoff or beyond the newest `keep`, their
    /// chunks with them; unfinished ones (resumable) never, however old.
    @Test func pruningForgetsOldAndSurplusFinishedTransfersOnly() throws {
        let index = try indexWithPeers()
        let states: [TransferRecord.State] = [.completed, .failed, .cancelled, .completed, .completed, .paused, .active, .offered]
        for (n, state) in states.enumerated() {
            var (record, chunks) = sampleTransfer(id: "t\(n)", peer: 1, chunkCount: 2)
            record.state = state
            record.createdAt = Int64(n) * 1000
            record.updatedAt = Int64(n) * 1000
            try index.insertTransfer(record, chunks: chunks)
        }
        // Changed before 1000 (t0), and beyond the newest 2 finished (t4, t3): t1, t2.
        #expect(try index.pruneFinishedTransfers(changedBefore: 1000, keepingNewest: 2) == 3)
        #expect(try index.transfers().map(\.id) == ["t3", "t4", "t5", "t6", "t7"])
        #expect(try index.transferChunks(transferID: "t1").isEmpty)
        #expect(try index.transferChunks(transferID: "t3").count == 2)
        // Keeping none, from the future: only the unfinished are left.
        #expect(try index.pruneFinishedTransfers(changedBefore: .max, keepingNewest: 0) == 2)
        #expect(try index.transfers().map(\.id) == ["t5", "t6", "t7"])
    }

    @Test(arguments: TransferRecord.State.allCases)
    func stateUpdates(_ state: TransferRecord.State) throws {
        let index = try indexWithPeers()
        let (record, chunks) = sampleTransfer(id: "t1", peer: 1, chunkCount: 1)
        try index.insertTransfer(record, chunks: chunks)
        let message = state == .failed ? "peer closed the connection" : nil
        try index.updateTransferState(id: "t1", to: state, error: message)
        let stored = try #require(try index.transfer(id: "t1"))
        #expect(stored.state == state)
        #expect(stored.error == message)
        #expect(stored.updatedAt == fixedClock())
        let resumable = try index.resumableTransfer(deviceID: deviceID(1), rootHash: record.rootHash, direction: .receive)
        #expect((resumable?.id == "t1") == state.isUnfinished)
        let error = #expect(throws: IndexError.self) { try index.updateTransferState(id: "missing", to: state) }
        #expect(error?.kind == .notFound)
    }

    @Test func tenThousandChunksVerifiedInOneCall() throws {
        let index = try indexWithPeers()
        let (record, chunks) = sampleTransfer(id: "big", peer: 2, chunkCount: 10_000, chunkSize: 4_096)
        try index.insertTransfer(record, chunks: chunks)
        #expect(try index.verifiedChunks(transferID: "big").isEmpty)

        try index.markChunksVerified(transferID: "big", indices: 0..<10_000)
        #expect(try index.verifiedChunks(transferID: "big") == Set(0..<10_000))
        #expect(try index.transfer(id: "big")?.bytesDone == record.size)
    }

    @Test func partialVerificationTracksBytesAndUnknownIndexRollsBackTheBatch() throws {
        let index = try indexWithPeers()
        let (record, chunks) = sampleTransfer(id: "t", peer: 1, chunkCount: 10, chunkSize: 100)
        try index.insertTransfer(record, chunks: chunks)
        try index.markChunksVerified(transferID: "t", indices: [1, 3, 3, 5])
        #expect(try index.verifiedChunks(transferID: "t") == [1, 3, 5])
        #expect(try index.transfer(id: "t")?.bytesDone == 300)

        let error = #expect(throws: IndexError.self) { try index.markChunksVerified(transferID: "t", indices: [7, 10]) }
        #expect(error?.kind == .notFound)
        #expect(error?.message.contains("no chunk 10") == true)
        #expect(try index.verifiedChunks(transferID: "t") == [1, 3, 5], "a failed batch must change nothing")
    }

    @Test func manifestMustMatchChunkCount() throws {
        let index = try indexWithPeers()
        let (record, chunks) = sampleTransfer(id: "t", peer: 1, chunkCount: 3)
        #expect(throws: IndexError.self) { try index.insertTransfer(record, chunks: Array(chunks.dropLast())) }
        #expect(throws: IndexError.self) { try index.insertTransfer(record, chunks: chunks.reversed()) }
        #expect(try index.transfers().isEmpty)
    }

    @Test func transferToAnUnknownPeerIsRejectedByTheForeignKey() throws {
        let index = try indexWithPeers()
        let (record, chunks) = sampleTransfer(id: "t", peer: 7, chunkCount: 2)
        let error = #expect(throws: IndexError.self) { try index.insertTransfer(record, chunks: chunks) }
        #expect(error?.resultCode == 787) // SQLITE_CONSTRAINT_FOREIGNKEY
        #expect(try index.transfers().isEmpty)
    }

    @Test func deletingATransferCascadesToItsChunks() throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("index.db").path
            let index = try NodeIndex.open(at: path, clock: fixedClock)
            try index.upsertPeer(samplePeer(1))
            for id in ["a", "b"] {
                let (record, chunks) = sampleTransfer(id: id, peer: 1, chunkCount: 50)
                try index.insertTransfer(record, chunks: chunks)
            }
            #expect(try index.deleteTransfer(id: "a"))
            #expect(try !index.deleteTransfer(id: "a"))
            let db = try Database.open(path: path)
            let counts = try db.query("SELECT transfer_id, count(*) AS n FROM transfer_chunks GROUP BY transfer_id")
            #expect(counts.map { $0["transfer_id"] } == ["b"])
            #expect(counts.first?["n"] == 50)

            // Forgetting the peer drops its transfers and their chunks.
            #expect(try index.deletePeer(deviceID: deviceID(1)))
            #expect(try index.transfers().isEmpty)
            #expect(try db.query("SELECT count(*) FROM transfer_chunks").first?[0] == 0)
        }
    }
}
