import Foundation
import PeerFiles
import Synchronization
import TestKit
@testable import SyncEngine
import Testing

/// `send` never puts bytes on the link that do not hash to the chunk its manifest names: a
/// resumed send trusts its manifest only as far as the source's size, mtime and inode, which
/// rot (or an edit that restored the mtime) leaves as they were.
@Suite struct SendVerifyTests {
    /// The link is cut mid-send; the source rots in a chunk not sent yet, its stamp unchanged;
    /// the resumed send stops at that chunk ("changed while it was being sent") and every
    /// chunk alice sent, before and after the cut, is one her manifest names.
    @Test func aResumedSendNeverSendsARottenChunk() throws {
        let (pair, outcome, source, _) = try TransferServiceTests.sendCutAfter(20, window: 512 << 10, seed: 11, name: "rots.bin")
        defer { pair.cleanup() }
        let manifest = try FileChunker.manifest(ofFileAt: source)
        try #require(DiskRot.flip(source, at: (6 << 20) - 1_000))
        pair.alice.chunkRule.withLock { $0.cutAfter = nil }
        pair.connect()
        try TransferPair.eventually("the send ends") { outcome.value != nil }
        guard case let .failure(error)? = outcome.value else { Issue.record("the send completed"); return }
        #expect(error.description.contains("changed while it was being sent"), "\(error)")
        let sent = pair.alice.chunksSent.withLock { $0 }
        #expect(sent.count > 20)
        let wrong = sent.filter { ChunkHash.of($0.bytes) != manifest.chunks[Int($0.index)].hash }.map(\.index)
        #expect(wrong.isEmpty, "chunks sent that are not the manifest's: \(wrong)")
    }
}
