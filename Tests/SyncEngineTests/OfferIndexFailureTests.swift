import Foundation
import PeerIndex
@testable import SyncEngine
import Synchronization
import Testing

/// Issue 42.2 for offers: a receiver whose transfer records cannot be read does not take an
/// offer as new (asking again, or receiving a second copy of what it half holds): it refuses
/// it, tells the sender why in general terms and its user the index's error.
@Suite struct OfferIndexFailureTests {
    @Test func anOfferToAReceiverThatCannotReadItsRecordsIsRefusedWithTheCause() throws {
        let bobStore = try FailingStore()
        let pair = try TransferPair(bobStore: bobStore)
        defer { pair.cleanup() }
        pair.connect()
        bobStore.failing.withLock { _ = $0.insert("transfer") }
        let source = pair.alice.directory + "/photo.bin"
        try TransferPair.randomFile(source, size: 50_000, seed: 9)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send ends") { outcome.value != nil }
        guard case let .failure(error)? = outcome.value else {
            Issue.record("the send did not fail: \(String(describing: outcome.value))")
            return
        }
        #expect(error.description.contains("bob declined: refused: the receiver cannot read its transfer records"), "\(error)")
        let report = pair.bob.events.errors.first { $0.contains("refused an offer from alice: cannot read the transfer records") }
        #expect(report?.contains("no such table: transfers") == true, "\(pair.bob.events.errors)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.bob.directory).isEmpty)
    }

    /// After a restart, sends waiting in the records are offered again when the peer
    /// connects; records that cannot be read are reported, not taken for "none".
    @Test func unfinishedSendsThatCannotBeReadAreReportedWhenThePeerConnects() throws {
        let aliceStore = try FailingStore()
        let pair = try TransferPair(aliceStore: aliceStore)
        defer { pair.cleanup() }
        aliceStore.failing.withLock { _ = $0.insert("transfers") }
        pair.connect()
        try TransferPair.eventually("alice reports the records she cannot read") {
            pair.alice.events.errors.contains { $0.contains("cannot read the transfer records to offer unfinished sends to bob again") }
        }
        #expect(pair.alice.events.errors.contains { $0.contains("no such table: transfers") })
    }
}
