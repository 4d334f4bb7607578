import Foundation
import Glibc
import PeerFiles
import PeerIndex
import PeerWire
@testable import SyncEngine
import Synchronization
import Testing

/// Streamed manifests (`streamed-manifest`): a large fresh file is offered before it is
/// hashed, its chunks carry their hashes, and the receiver learns the manifest from them.
/// What a user would check: the file arrives whole and both ends record its content; an
/// interrupted send resumes from what arrived; a file that changes meanwhile fails the send;
/// chunks that do not fit the offer stop the transfer and leave nothing behind.
@Suite struct StreamedManifestTests {
    static let size = 6 << 20

    /// A pair whose sender streams manifests of files from 1 MiB on.
    static func pair(window: Int = 16 << 20, rate: Int = 0) throws -> TransferPair {
        try TransferPair(configureAlice: {
            $0.streamManifestFrom = 1 << 20
            $0.sendWindowBytes = window
            $0.sendRateBytesPerSecond = rate
        })
    }

    static func content(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    @Test func aFreshFileIsOfferedBeforeItIsHashedAndArrivesWholeWithItsContentRecorded() throws {
        let pair = try Self.pair()
        defer { pair.cleanup() }
        pair.connect()
        let source = pair.alice.directory + "/fresh.bin"
        try TransferPair.randomFile(source, size: Self.size, seed: 21)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send completes") { outcome.value != nil }
        let info = try #require(TransferServiceTests.completed(outcome), "\(String(describing: outcome.value))")
        #expect(info.bytes == Int64(Self.size))
        #expect(try Self.content(TransferServiceTests.received(pair.bob, "fresh.bin")) == (try Self.content(source)))
        // Every chunk went with its hash: the offer had no manifest.
        let whole = try PreparedOffer.build(path: source, name: nil, kind: .file)
        #expect(pair.alice.hashedChunksSent.withLock { $0.sorted() } == (0..<UInt32(whole.layout.chunkCount)).map { $0 })
        // Both ends name the content once it is known, and bob's rows are the whole manifest.
        try TransferPair.eventually("bob records the completion") { (try? pair.bob.store.transfers())?.first?.state == .completed }
        let received = try #require(try pair.bob.store.transfers().first)
        let sent = try #require(try pair.alice.store.transfers().first)
        #expect(received.rootHash == whole.rootHash && sent.rootHash == whole.rootHash)
        #expect(received.chunkCount == whole.layout.chunkCount && sent.chunkCount == whole.layout.chunkCount)
        let rows = try pair.bob.store.transferChunks(transferID: received.id)
        #expect(rows.count == whole.layout.chunkCount && rows.contains(where: \.verified))
        #expect(rows.map(\.hash) == whole.sources[0].manifest!.chunks.map(\.hash.bytes))
        #expect(pair.bob.events.errors.isEmpty && pair.alice.events.errors.isEmpty, "\(pair.bob.events.errors) \(pair.alice.events.errors)")
    }

    /// A peer whose hello does not list the feature, or a file under the threshold, gets the
    /// whole manifest first, as before.
    @Test(arguments: ["peer without the feature", "small file"])
    func otherwiseTheWholeManifestIsOffered(_ situation: String) throws {
        let pair = try TransferPair(configureAlice: { $0.streamManifestFrom = situation == "small file" ? 8 << 20 : 1 << 20 })
        defer { pair.cleanup() }
        if situation == "peer without the feature" { pair.bob.speaksStreamedManifest.withLock { $0 = false } }
        pair.connect()
        let source = pair.alice.directory + "/whole.bin"
        try TransferPair.randomFile(source, size: Self.size, seed: 22)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send completes") { outcome.value != nil }
        #expect(TransferServiceTests.completed(outcome) != nil, "\(String(describing: outcome.value))")
        #expect(try Self.content(TransferServiceTests.received(pair.bob, "whole.bin")) == (try Self.content(source)))
        #expect(pair.alice.hashedChunksSent.withLock { $0.isEmpty })
    }

    /// The link is cut while a streamed send runs; the sender offers it again, whole, under
    /// the same ID, and the receiver answers with what it holds: at most a window travels
    /// twice, and the chunks after the cut go without their hashes.
    @Test(arguments: ["link back", "receiver restarted"])
    func aStreamedSendThatIsCutResumesFromWhatArrived(_ how: String) throws {
        let window = 512 << 10
        let pair = try Self.pair(window: window)
        defer { pair.cleanup() }
        pair.alice.chunkRule.withLock { $0.cutAfter = 30 }
        pair.connect()
        let source = pair.alice.directory + "/cut.bin"
        try TransferPair.randomFile(source, size: Self.size, seed: 23)
        let outcome = pair.send(source)
        try TransferPair.eventually("30 chunks are sent") { pair.alice.chunkRule.withLock { $0.sent } >= 30 }
        pair.cut()
        try TransferPair.eventually("both ends pause") {
            pair.alice.events.transfers.last?.state == .paused && pair.bob.events.transfers.last?.state == .paused
        }
        let held = try #require(pair.bob.events.transfers.last?.bytes)
        #expect(held > 0 && held < Int64(Self.size))
        if how == "receiver restarted" {
            let record = try #require(try pair.bob.store.transfers().first)
            try TransferPair.eventually("bob's index records what he holds") {
                (try? pair.bob.store.transfer(id: record.id))?.bytesDone == held
            }
            try pair.restartBob()
        }
        let hashedBeforeCut = pair.alice.hashedChunksSent.withLock { $0.count }
        pair.alice.chunkRule.withLock { $0.cutAfter = nil }
        pair.connect()
        try TransferPair.eventually("the send completes") { outcome.value != nil }
        let info = try #require(TransferServiceTests.completed(outcome), "\(String(describing: outcome.value))")
        #expect((info.resent ?? .max) <= Int64(window), "re-sent \(info.resent ?? -1) bytes, window \(window)")
        #expect(try Self.content(TransferServiceTests.received(pair.bob, "cut.bin")) == (try Self.content(source)))
        #expect(pair.alice.hashedChunksSent.withLock { $0.count } == hashedBeforeCut)
        #expect(try pair.bob.store.transfers().count == 1 && Set(pair.alice.events.transfers.map(\.transfer)).count == 1)
        let whole = try PreparedOffer.build(path: source, name: nil, kind: .file)
        try TransferPair.eventually("bob records the completion") { (try? pair.bob.store.transfers())?.first?.state == .completed }
        #expect(try pair.bob.store.transfers().first?.rootHash == whole.rootHash)
    }

    /// What a sender's index holds after its process stopped while it was still hashing a
    /// streamed send: the record, with no content hash and no chunk rows yet.
    static func recordInterruptedStream(_ pair: TransferPair, source: String) throws -> String {
        let stamp = try #require(PreparedOffer.FileStamp(path: source))
        var st = stat()
        #expect(stat(source, &st) == 0)
        let id = TransferID.random().description
        try pair.alice.store.insertTransfer(
            TransferRecord(id: id, direction: .send, deviceID: pair.bob.deviceKey, name: "stopped.bin", size: stamp.size,
                           mode: UInt32(st.st_mode) & 0o7777,
                           mtimeNs: stamp.mtimeNs, rootHash: TransferRecord.unknownRootHash, chunkCount: 0, state: .paused,
                           finalPath: source, createdAt: 1), chunks: [])
        return id
    }

    /// The sender's process stopped while it hashed a streamed send. When the peer is back
    /// (or the user sends the file again) the file, unchanged, goes whole under the same ID,
    /// and the record gets its content; a file changed meanwhile is a new transfer.
    @Test(arguments: ["peer back", "sent again", "changed"])
    func aSendStoppedWhileHashingContinuesUnderItsID(_ how: String) throws {
        let pair = try Self.pair()
        defer { pair.cleanup() }
        let source = pair.alice.directory + "/stopped.bin"
        try TransferPair.randomFile(source, size: Self.size, seed: 26)
        let id = try Self.recordInterruptedStream(pair, source: source)
        var outcome: Outcome?
        switch how {
        case "sent again": outcome = pair.send(source)
        case "changed":
            var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, source, &times, 0) == 0)
        default: break
        }
        pair.connect()
        try TransferPair.eventually("bob has the file") {
            (try? pair.bob.store.transfers())?.first?.state == .completed
        }
        if let outcome {
            try TransferPair.eventually("the send completes") { outcome.value != nil }
            #expect(TransferServiceTests.completed(outcome) != nil, "\(String(describing: outcome.value))")
        }
        #expect(try Self.content(TransferServiceTests.received(pair.bob, "stopped.bin")) == (try Self.content(source)))
        let whole = try PreparedOffer.build(path: source, name: nil, kind: .file)
        let received = try #require(try pair.bob.store.transfers().first)
        let old = try #require(try pair.alice.store.transfer(id: id))
        if how == "changed" {
            #expect(received.id != id && old.state == .cancelled, "\(old)")
        } else {
            try TransferPair.eventually("alice records the completion") { (try? pair.alice.store.transfer(id: id))?.state == .completed }
            let sent = try #require(try pair.alice.store.transfer(id: id))
            #expect(received.id == id && sent.rootHash == whole.rootHash && sent.chunkCount == whole.layout.chunkCount)
            #expect(try pair.alice.store.transfers().count == 1)
        }
        #expect(pair.alice.events.errors.isEmpty && pair.bob.events.errors.isEmpty, "\(pair.alice.events.errors) \(pair.bob.events.errors)")
    }

    /// A duplicate connection while a streamed send is still being hashed: its offer on the
    /// session kept waits for the whole manifest, and goes out once the file is hashed. (It
    /// was left without a session until the handover's grace paused it, 15 s later, and then
    /// stayed paused with the peer connected: the send never ended.)
    @Test func aSessionReplacedWhileTheFileIsHashedGoesOnOnTheKeptSession() throws {
        let pair = try Self.pair()
        defer { pair.finish() }
        pair.connect()
        let source = pair.alice.directory + "/replaced.bin"
        try TransferPair.randomFile(source, size: 32 << 20, seed: 27)
        let outcome = pair.send(source)
        // In one step of alice's queue: the offer is out, the file still being hashed as her
        // queue sees it, and the session is replaced.
        var replaced = false
        let deadline = ContinuousClock.now + .seconds(30)
        while !replaced && ContinuousClock.now < deadline {
            replaced = pair.alice.sync {
                guard let transfer = pair.alice.service.transfers.outgoing.values.first,
                      transfer.state == .offered || transfer.state == .active, transfer.hashing != nil else { return false }
                pair.replaceSessionFromAlicesQueue()
                return true
            }
            if !replaced { Thread.sleep(forTimeInterval: 0.002) }
        }
        try #require(replaced, "the file was hashed before the session could be replaced")
        try TransferPair.eventually("the send completes", timeout: 40) { outcome.value != nil }
        #expect(TransferServiceTests.completed(outcome) != nil, "\(String(describing: outcome.value))")
        #expect(try Self.content(TransferServiceTests.received(pair.bob, "replaced.bin")) == (try Self.content(source)))
        for end in [pair.alice, pair.bob] {
            let paused = end.events.transfers.filter { $0.state == .paused }
            #expect(paused.isEmpty, "\(end.name) paused: \(paused)")
        }
    }

    /// A file written to while it is hashed and sent is not sent as if it had not changed.
    @Test func aFileThatChangesWhileItIsSentFailsTheSend() throws {
        let pair = try Self.pair(rate: 4 << 20)
        defer { pair.cleanup() }
        pair.connect()
        let source = pair.alice.directory + "/moving.bin"
        try TransferPair.randomFile(source, size: Self.size, seed: 24)
        let outcome = pair.send(source)
        try TransferPair.eventually("a chunk is sent") { pair.alice.chunkRule.withLock { $0.sent } >= 1 }
        let handle = try #require(FileHandle(forWritingAtPath: source))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 7, count: 4096))
        try handle.close()
        try TransferPair.eventually("the send ends") { outcome.value != nil }
        guard case let .failure(error)? = outcome.value else {
            Issue.record("a send of a changing file completed: \(String(describing: outcome.value))")
            return
        }
        #expect(error.description.contains("changed"), "\(error)")
        #expect(!FileManager.default.fileExists(atPath: TransferServiceTests.received(pair.bob, "moving.bin")))
    }

    /// Chunks that do not fit a streamed offer (too small, past its end, out of order, or
    /// sent again as something else) stop the transfer: the receiver cancels, fails it, and
    /// keeps nothing of it.
    @Test(arguments: ["too small", "past the end", "out of order", "sent again otherwise", "empty"])
    func chunksThatDoNotFitTheOfferStopTheTransfer(_ lie: String) throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.connect()
        let size: UInt64 = 4 << 20    // 64 KiB chunks: 16 KiB … 256 KiB, but the last
        let id = TransferID.random()
        let entry = TransferOffer.Entry(path: "lie.bin", size: size, mode: 0o644, mtimeNanoseconds: 0, manifest: [])
        pair.alice.sendRaw([.offer(TransferOffer(id: id, kind: .file, name: "lie.bin", entries: [entry]))])
        try TransferPair.eventually("bob accepts") { pair.bob.events.transfers.last?.state == .active }
        func chunk(_ index: UInt32, _ data: [UInt8]) -> Frame {
            .hashedChunk(id: id, index: index, hash: ChunkHash.of(data).bytes, data: data)
        }
        let good = [UInt8](repeating: 1, count: 100_000)
        switch lie {
        case "too small": pair.alice.sendRaw([chunk(0, [UInt8](repeating: 2, count: 1000))])
        case "past the end": pair.alice.sendRaw([chunk(0, good), chunk(1, [UInt8](repeating: 3, count: 250_000))]
                                                + (2..<18).map { chunk(UInt32($0), [UInt8](repeating: UInt8($0), count: 250_000)) })
        case "out of order": pair.alice.sendRaw([chunk(1, good)])
        case "sent again otherwise": pair.alice.sendRaw([chunk(0, good), chunk(0, [UInt8](repeating: 9, count: 100_000))])
        default: pair.alice.sendRaw([chunk(0, [])])
        }
        try TransferPair.eventually("bob's end fails") { pair.bob.events.transfers.last?.state == .failed }
        #expect(pair.bob.events.transfers.last?.reason?.contains("do not fit its offer") == true, "\(pair.bob.events.transfers.last!)")
        try TransferPair.eventually("the partial file is removed") {
            let names = (try? FileManager.default.subpathsOfDirectory(atPath: pair.bob.directory)) ?? ["?"]
            return names.allSatisfy { !$0.hasSuffix(PartialFile.fileExtension) }
        }
        #expect(!FileManager.default.fileExists(atPath: TransferServiceTests.received(pair.bob, "lie.bin")))
    }

    /// An offer that would let a streamed manifest grow without bound, or that mixes the two
    /// kinds of entries the wrong way round, or that reuses the ID of a transfer the receiver
    /// has recorded (whose verified rows it would trust), is declined before anything is kept.
    @Test(arguments: ["huge", "empty file", "manifest after a streamed entry", "an ID bob has recorded"])
    func aStreamedOfferOutsideTheRulesIsDeclined(_ kind: String) throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.connect()
        let source = pair.alice.directory + "/x.bin"
        try TransferPair.randomFile(source, size: 100_000, seed: 25)
        var whole = try PreparedOffer.build(path: source, name: nil, kind: .file).offer.entries[0]
        whole.path = "b.bin"
        var streamed = TransferOffer.Entry(path: "a.bin", size: 1 << 20, mode: 0o644, mtimeNanoseconds: 0, manifest: [])
        var entries = [streamed, whole]
        var id = TransferID.random()
        switch kind {
        case "an ID bob has recorded":
            entries = [streamed]
            id = .random()
            try pair.bob.store.insertTransfer(
                TransferRecord(id: id.description, direction: .receive, deviceID: pair.alice.deviceKey, name: "folder", size: 1 << 20,
                               mode: 0o644, mtimeNs: 0, rootHash: TransferRecord.unknownRootHash, chunkCount: 0, state: .paused,
                               partialPath: pair.bob.directory, createdAt: 1), chunks: [])
        case "huge":
            streamed.size = 1 << 62
            entries = [streamed]
        case "empty file":
            streamed.size = 0
            entries = [streamed]
        default: break
        }
        pair.alice.sendRaw([.offer(TransferOffer(id: id, kind: .folder, name: "folder", entries: entries))])
        try TransferPair.eventually("bob refuses it") { !pair.bob.events.errors.isEmpty }
        #expect(pair.bob.events.errors.first?.contains("refused an offer from alice") == true, "\(pair.bob.events.errors)")
        #expect(try pair.bob.events.offers.isEmpty && pair.bob.store.transfers().count == (kind == "an ID bob has recorded" ? 1 : 0))
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.bob.directory).isEmpty)
    }
}
