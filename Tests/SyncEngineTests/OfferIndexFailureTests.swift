import Foundation
import PeerIndex
@testable import SyncEngine
import Synchronization
import Testing

/// Issue 42.2 for sends and offers: a receiver whose transfer records cannot be read does not
/// take an offer as new (asking again, or receiving a second copy of what it half holds): it
/// refuses it, tells the sender why in general terms and its user the index's error; a sender
/// does not start over a send it cannot look up, and says why.
@Suite struct OfferIndexFailureTests {
    @Test func anOfferToAReceiverThatCannotReadItsRecordsIsRefusedWithTheCause() throws {
        let bobStore = try FailingStore()
        let pair = try TransferPair(bobStore: bobStore)
        defer { pair.cleanup() }
        pair.connect()
        bobStore.failing.withLock { _ = $0.insert("transfer") }
        guard let error = try Self.failedSend(pair) else { return }
        #expect(error.description.contains("bob declined: refused: the receiver cannot read its transfer records"), "\(error)")
        let report = pair.bob.events.errors.first { $0.contains("refused an offer from alice: cannot read the transfer records") }
        #expect(report?.contains("no such table: transfers") == true, "\(pair.bob.events.errors)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.bob.directory).isEmpty)
    }

    /// A send whose earlier transfers to the peer cannot be read (it may be half sent
    /// already) fails with the index's error instead of starting over.
    @Test func aSendWhoseRecordsCannotBeReadFailsWithTheCause() throws {
        let aliceStore = try FailingStore()
        let pair = try TransferPair(aliceStore: aliceStore)
        defer { pair.cleanup() }
        pair.connect()
        aliceStore.failing.withLock { _ = $0.insert("transfers") }
        guard let error = try Self.failedSend(pair) else { return }
        #expect(error.kind == .index && error.description.contains("no such table: transfers"), "\(error)")
        #expect(pair.bob.events.offers.isEmpty)
    }

    /// Sends a small file from alice to bob and waits for the send to end: its error, or nil
    /// (an issue recorded) when it did not fail.
    static func failedSend(_ pair: TransferPair) throws -> EngineError? {
        let source = pair.alice.directory + "/photo.bin"
        try TransferPair.randomFile(source, size: 50_000, seed: 9)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send ends") { outcome.value != nil }
        guard case let .failure(error)? = outcome.value else {
            Issue.record("the send did not fail: \(String(describing: outcome.value))")
            return nil
        }
        return error
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
