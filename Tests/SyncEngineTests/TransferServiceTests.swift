import Foundation
import Glibc
import PeerFiles
import PeerIndex
import PeerWire
@testable import SyncEngine
import Synchronization
import Testing

/// The transfer service on its own (issue 12): two services joined by an in-memory link
/// (`TransferPair`), each with an in-memory index, real files in temporary folders. What a
/// user would check: the file arrives whole, a cut link resumes without sending again what
/// arrived, hostile offers write nothing, a failed index write is reported, a lying sender
/// is cut off.
@Suite struct TransferServiceTests {
    static func received(_ end: TransferPair.End, _ name: String) -> String { end.directory + "/" + name }

    static func completed(_ outcome: Outcome) -> TransferInfo? {
        if case let .success(info)? = outcome.value { return info }
        return nil
    }

    @Test func aFileCrossesTheLinkVerifiedPlacedAndRecorded() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.connect()
        let source = pair.alice.directory + "/report.bin"
        try TransferPair.randomFile(source, size: 4 << 20, seed: 1)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send completes") { outcome.value != nil }
        let info = try #require(Self.completed(outcome), "\(String(describing: outcome.value))")
        #expect(info.state == .completed && info.bytes == 4 << 20)
        let arrived = try Data(contentsOf: URL(fileURLWithPath: Self.received(pair.bob, "report.bin")))
        #expect(arrived == (try Data(contentsOf: URL(fileURLWithPath: source))))
        // Both ends record it as completed; the receiver also where it put it.
        try TransferPair.eventually("bob records the completion") {
            (try? pair.bob.store.transfers())?.first?.state == .completed
        }
        let record = try #require(try pair.bob.store.transfers().first)
        #expect(record.finalPath == Self.received(pair.bob, "report.bin"))
        #expect(try pair.alice.store.transfers().first?.state == .completed)
        // Every chunk counted against the session's flow was handled; nothing is left over.
        #expect(pair.bob.flow.unhandled.frames == 0 && pair.bob.flow.unhandled.bytes == 0)
        #expect(pair.bob.events.offers.count == 1 && pair.bob.events.errors.isEmpty, "\(pair.bob.events.errors)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.bob.directory) == ["report.bin"])
    }

    @Test func aSendToAPeerThatIsOfflineWaitsAndGoesOutWhenItConnects() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let source = pair.alice.directory + "/later.bin"
        try TransferPair.randomFile(source, size: 300_000, seed: 2)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send waits for bob") { pair.alice.events.transfers.last?.state == .paused }
        #expect(pair.alice.events.transfers.last?.reason?.contains("waiting for bob") == true)
        pair.connect()
        try TransferPair.eventually("the send completes") { outcome.value != nil }
        #expect(Self.completed(outcome) != nil)
        #expect(FileManager.default.fileExists(atPath: Self.received(pair.bob, "later.bin")))
    }

    /// A pair whose sender has a window of `window` bytes and sends a 6 MiB file whose link
    /// is cut after `chunks` chunks (the rest in flight is lost); returns once both ends are
    /// paused, with the send's outcome, its source and the bytes the receiver holds.
    static func sendCutAfter(_ chunks: Int, window: Int, seed: UInt64, name: String)
        throws -> (pair: TransferPair, outcome: Outcome, source: String, held: Int64) {
        let pair = try TransferPair(configureAlice: { $0.sendWindowBytes = window })
        pair.alice.chunkRule.withLock { $0.cutAfter = chunks }
        pair.connect()
        let source = pair.alice.directory + "/" + name
        try TransferPair.randomFile(source, size: 6 << 20, seed: seed)
        let outcome = pair.send(source)
        try TransferPair.eventually("\(chunks) chunks are sent") { pair.alice.chunkRule.withLock { $0.sent } >= chunks }
        pair.cut()
        try TransferPair.eventually("both ends pause") {
            pair.alice.events.transfers.last?.state == .paused && pair.bob.events.transfers.last?.state == .paused
        }
        let held = try #require(pair.bob.events.transfers.last?.bytes)
        #expect(held > 0 && held < 6 << 20)
        return (pair, outcome, source, held)
    }

    /// The receiver's last event of the transfer (completed) gives the sender's "re-sent" figure.
    static func expectSameResent(_ sent: TransferInfo, _ receiver: TransferPair.End,
                                 sourceLocation: SourceLocation = #_sourceLocation) throws {
        try TransferPair.eventually("the receiver's transfer completes") { receiver.events.transfers.last?.state == .completed }
        let received = try #require(receiver.events.transfers.last)
        #expect(received.resent == sent.resent, "receiver: \(received.resent ?? -1), sender: \(sent.resent ?? -1)",
                sourceLocation: sourceLocation)
    }

    /// The link is cut after 20 chunks (the rest in flight is lost); when it is back the
    /// sender offers again under the same ID, the receiver answers with what it holds, and no
    /// more than one window travels twice.
    @Test func aCutLinkPausesBothEndsAndResumesWithoutSendingTwiceWhatArrived() throws {
        let window = 512 << 10
        let (pair, outcome, source, _) = try Self.sendCutAfter(20, window: window, seed: 3, name: "big.bin")
        defer { pair.cleanup() }
        pair.alice.chunkRule.withLock { $0.cutAfter = nil }
        pair.connect()
        try TransferPair.eventually("the send completes") { outcome.value != nil }
        let info = try #require(Self.completed(outcome), "\(String(describing: outcome.value))")
        #expect((info.resent ?? .max) <= Int64(window), "re-sent \(info.resent ?? -1) bytes, window \(window)")
        // What was lost in flight went twice, and both ends say so with one figure.
        #expect((info.resent ?? 0) > 0)
        try Self.expectSameResent(info, pair.bob)
        #expect(try Data(contentsOf: URL(fileURLWithPath: Self.received(pair.bob, "big.bin")))
                == (try Data(contentsOf: URL(fileURLWithPath: source))))
        // One transfer on each side: the resume continued it (same ID), it did not start another.
        #expect(try pair.bob.store.transfers().count == 1 && pair.bob.events.offers.count == 1)
        #expect(Set(pair.alice.events.transfers.map(\.transfer)).count == 1)
    }

    /// The receiver's process restarts mid-transfer (nothing of it left but its index and
    /// its partial file): the sender offers again under the same ID, the new receiver
    /// resumes from what its index recorded as verified, without asking the user again, and
    /// no more than one window travels twice. A partial file cut short or lost while the
    /// receiver was down is not trusted past its end: the file still arrives whole.
    @Test(arguments: ["as left", "cut short", "removed"])
    func aRestartedReceiverResumesFromItsRecordsAndTrustsNoneOfThemPastThePartialFilesEnd(_ partialFile: String) throws {
        let window = 512 << 10
        let (pair, outcome, source, held) = try Self.sendCutAfter(40, window: window, seed: 8, name: "restart.bin")
        defer { pair.cleanup() }
        // What bob holds is recorded (durable first) before his process goes away.
        let record = try #require(try pair.bob.store.transfers().first)
        try TransferPair.eventually("bob's index records what he holds") {
            (try? pair.bob.store.transfer(id: record.id))?.bytesDone == held
        }
        let part = pair.bob.directory + "/" + PartialFile.stagingDirectoryName + "/" + record.id + PartialFile.fileExtension
        switch partialFile {
        case "cut short": #expect(truncate(part, off_t(held / 3)) == 0)
        case "removed": #expect(unlink(part) == 0)
        default: break
        }
        try pair.restartBob()
        pair.alice.chunkRule.withLock { $0.cutAfter = nil }
        pair.connect()
        try TransferPair.eventually("the send completes") { outcome.value != nil }
        let info = try #require(Self.completed(outcome), "\(String(describing: outcome.value))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: Self.received(pair.bob, "restart.bin")))
                == (try Data(contentsOf: URL(fileURLWithPath: source))))
        let resent = info.resent ?? .max
        switch partialFile {
        case "as left": #expect(resent <= Int64(window), "re-sent \(resent) bytes, window \(window)")
        case "cut short": #expect(resent >= held / 2 && resent <= held - held / 3 + Int64(window) + (256 << 10), "re-sent \(resent) of \(held)")
        default: #expect(resent >= held, "re-sent \(resent) of \(held)")
        }
        try Self.expectSameResent(info, pair.bob)
        // The same transfer, resumed without a new decision: one record, no offer shown.
        #expect(try pair.bob.store.transfers().count == 1 && pair.bob.events.offers.isEmpty)
        #expect(pair.bob.events.transfers.first?.state == .active)
    }

    /// Hostile offers: a name or entry path that leaves the folder, duplicate entries, a
    /// manifest that does not match its entry. Each is declined with the reason and writes
    /// nothing.
    @Test(arguments: ["../escape", "a/../../escape", "/etc/passwd", "dup", "size"])
    func aHostileOfferIsDeclinedAndWritesNothing(_ kind: String) throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.connect()
        let source = pair.alice.directory + "/x.bin"
        try TransferPair.randomFile(source, size: 100_000, seed: 4)
        let manifest = try PreparedOffer.build(path: source, name: nil, kind: .file).offer.entries[0]
        var entries = [manifest]
        switch kind {
        case "dup": entries = [manifest, manifest]
        case "size": entries[0].size += 1
        default: entries[0].path = kind
        }
        for i in entries.indices where kind == "dup" { entries[i].path = "same.bin" }
        let offer = TransferOffer(id: .random(), kind: .folder, name: "folder", entries: entries)
        // Alice's end plays the hostile sender: the frame goes out on her link as is.
        pair.alice.sendRaw([.offer(offer)])
        try TransferPair.eventually("bob refuses it") { !pair.bob.events.errors.isEmpty }
        #expect(pair.bob.events.errors.first?.contains("refused an offer from alice") == true, "\(pair.bob.events.errors)")
        #expect(pair.bob.events.offers.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.bob.directory).isEmpty)
        #expect(try pair.bob.store.transfers().isEmpty)
    }

    /// Resume after a restart depends on the index's records: a write that fails is never
    /// silent. It is an error event naming the transfer, and the transfer's events carry it.
    @Test(arguments: ["verified", "state"])
    func anIndexWriteThatFailsIsReportedAndShownOnTheTransfer(_ failing: String) throws {
        let store = try FailingStore()
        store.failing.withLock { $0 = [failing] }
        let pair = try TransferPair(bobStore: store)
        defer { pair.cleanup() }
        pair.connect()
        let source = pair.alice.directory + "/doc.bin"
        try TransferPair.randomFile(source, size: 1 << 20, seed: 5)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send completes") { outcome.value != nil }
        // Verified chunks are recorded once they are durable (after an fdatasync that runs
        // beside the final commit): that report may come just after the completion.
        try TransferPair.eventually("bob reports the failed write") {
            pair.bob.events.errors.contains { $0.contains("cannot record") }
        }
        let failure = try #require(pair.bob.events.errors.first { $0.contains("cannot record") }, "\(pair.bob.events.errors)")
        #expect(failure.contains("doc.bin") && failure.contains("database or disk is full"), "\(failure)")
        #expect(failure.contains(failing == "verified" ? "verified chunks" : "state"), "\(failure)")
        if failing == "state" {
            // The completion could not be recorded: the last event says so.
            try TransferPair.eventually("bob's transfer ends") { pair.bob.events.transfers.last?.state == .completed }
            #expect(pair.bob.events.transfers.last?.reason?.contains("cannot record") == true, "\(pair.bob.events.transfers.last!)")
        }
        // The file itself is whole: only the record of verified chunks was lost.
        #expect(try Data(contentsOf: URL(fileURLWithPath: Self.received(pair.bob, "doc.bin")))
                == (try Data(contentsOf: URL(fileURLWithPath: source))))
    }

    /// Every chunk arrives corrupted: each is asked for again, and after 8 failures the
    /// receiver cancels; the sender's observer hears why; no partial data is left.
    @Test func aSenderWhoseChunksKeepFailingVerificationIsCutOff() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.alice.chunkRule.withLock { $0.corruptEvery = true }
        pair.connect()
        let source = pair.alice.directory + "/lies.bin"
        try TransferPair.randomFile(source, size: 2 << 20, seed: 6)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send ends") { outcome.value != nil }
        guard case let .failure(error)? = outcome.value else {
            Issue.record("a send of corrupted chunks completed: \(String(describing: outcome.value))")
            return
        }
        #expect(error.description.contains("too many chunks failed verification"), "\(error)")
        // Failed, never resumable: its partial data would otherwise stay on disk for good.
        try TransferPair.eventually("bob's end fails") { pair.bob.events.transfers.last?.state == .failed }
        #expect(pair.bob.events.errors.filter { $0.contains("failed verification") }.count == TransferService.maxBadChunks)
        try TransferPair.eventually("the partial file is removed") {
            let names = (try? FileManager.default.subpathsOfDirectory(atPath: pair.bob.directory)) ?? ["?"]
            return names.allSatisfy { !$0.hasSuffix(PartialFile.fileExtension) }
        }
        #expect(!FileManager.default.fileExists(atPath: Self.received(pair.bob, "lies.bin")))
    }

    /// Without auto-accept the offer waits for the user; a decline reaches the sender's
    /// observer with the reason, and nothing is written.
    @Test func aDeclinedOfferEndsTheSendWithTheReceiversReason() throws {
        let pair = try TransferPair(configureBob: { $0.autoAccept = false })
        defer { pair.cleanup() }
        pair.connect()
        let source = pair.alice.directory + "/unwanted.bin"
        try TransferPair.randomFile(source, size: 50_000, seed: 7)
        let outcome = pair.send(source)
        try TransferPair.eventually("bob sees the offer") { !pair.bob.events.offers.isEmpty }
        let id = try #require(pair.bob.events.offers.first?.transfer)
        let answer = try pair.bob.service.answerOffer(String(id.prefix(8)), accept: false, directory: nil)
        #expect(answer.state == .declined)
        try TransferPair.eventually("the send ends") { outcome.value != nil }
        guard case let .failure(error)? = outcome.value else {
            Issue.record("a declined send did not fail: \(String(describing: outcome.value))")
            return
        }
        #expect(error.description.contains("declined"), "\(error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.bob.directory).isEmpty)
        #expect(try pair.alice.service.transferList(.everything).items.first?.reason?.contains("declined") == true)
    }
}
