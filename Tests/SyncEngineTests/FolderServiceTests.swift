import PeerModel
import Foundation
import PeerFiles
import PeerIndex
import PeerWire
@testable import SyncEngine
import Synchronization
import TestKit
import Testing

/// The folder service on its own (issue 12): two ends over the in-memory link of
/// `TransferPair`, each with its own in-memory index and real folders, no sockets or
/// processes. Sharing, accepting, the index exchange and block pulls all cross the link.
@Suite struct FolderServiceTests {
    static func contents(_ root: String) -> [String: Data] {
        var out: [String: Data] = [:]
        for path in (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? [] where !path.hasPrefix(".syncpeer") {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                out[path] = FileManager.default.contents(atPath: root + "/" + path)
            }
        }
        return out
    }

    /// alice shares a folder with bob, who accepts it automatically: bob gets a new folder
    /// named after the label, with alice's files; an edit of alice's follows.
    @Test func aSharedFolderArrivesWholeAndAnEditFollows() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs + "/notes", withIntermediateDirectories: true)
        try TransferPair.randomFile(docs + "/big.bin", size: 2 << 20, seed: 21)
        try "first".write(toFile: docs + "/notes/a.txt", atomically: false, encoding: .utf8)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        #expect(shared.label == "docs" && shared.peers.map(\.name) == ["bob"])
        let received = pair.bob.directory + "/docs"
        try TransferPair.eventually("bob holds alice's files") { Self.contents(received) == Self.contents(docs) }
        #expect(Self.contents(received).count == 2)
        try "second, longer".write(toFile: docs + "/notes/a.txt", atomically: false, encoding: .utf8)
        try TransferPair.eventually("the edit reaches bob") {
            (try? String(contentsOfFile: received + "/notes/a.txt", encoding: .utf8)) == "second, longer"
        }
        #expect(pair.bob.events.errors.isEmpty && pair.alice.events.errors.isEmpty, "\(pair.bob.events.errors) \(pair.alice.events.errors)")
        // Both see the other as a member of the same folder.
        #expect(try pair.bob.index.folderPeers(folderID: shared.folder).map(\.deviceID) == [pair.alice.deviceKey])
    }

    /// Small files' content travels with alice's index to a peer whose hello lists
    /// `index-blocks`: bob asks for none of them, only for the chunks of the larger file.
    /// Bob's index, echoed back with alice's files, carries no content (alice has it). A
    /// peer without the feature gets no such frame and asks for every file as before.
    @Test(arguments: [true, false])
    func smallFilesTravelWithTheIndex(_ feature: Bool) throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.bob.speaksIndexBlocks.withLock { $0 = feature }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs + "/sub", withIntermediateDirectories: true)
        let small = (0..<40).map { $0 < 20 ? "s\($0).txt" : "sub/s\($0).txt" }
        for (n, name) in small.enumerated() { try TransferPair.randomFile(docs + "/" + name, size: 1 + n * 400, seed: 300 + UInt64(n)) }
        try TransferPair.randomFile(docs + "/big.bin", size: 600_000, seed: 299)
        pair.connect()
        _ = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        let received = pair.bob.directory + "/docs"
        try TransferPair.eventually("bob holds alice's files") { Self.contents(received) == Self.contents(docs) }
        let asked = Set(pair.bob.blockPathsAsked.withLock { $0 })
        let sent = pair.alice.indexBlocksSent.withLock { $0 }
        if feature {
            #expect(asked == ["big.bin"], "\(asked.sorted()); \(pair.alice.indexBlocksSent.withLock { $0 }.count) blocks sent, index pages \(pair.alice.indexPathsSent.withLock { $0 })")
            let contents = try small.map { try [UInt8](Data(contentsOf: URL(fileURLWithPath: docs + "/" + $0))) }
            // (A page may go twice: bob's acceptance resets what was sent.)
            #expect(Set(sent) == Set(contents))
        } else {
            #expect(asked == Set(small + ["big.bin"]), "\(asked.sorted())")
            #expect(sent.isEmpty)
        }
        // Bob's index reaches alice (the echo), without content.
        try TransferPair.eventually("alice has bob's entries") {
            ((try? pair.alice.index.remoteFiles(folderID: try #require(pair.alice.index.folders().first).id, paths: Set(small))) ?? [:])
                .count == small.count
        }
        #expect(pair.bob.indexBlocksSent.withLock { $0 }.isEmpty)
        #expect(pair.bob.events.errors.isEmpty && pair.alice.events.errors.isEmpty, "\(pair.bob.events.errors) \(pair.alice.events.errors)")
    }

    /// What a session holds for its next index page is a page's worth, however the peer
    /// cuts it: tiny blocks count their arrays' overhead, and a frame beyond the limit is
    /// dropped whole. A sender cuts a page's content into frames of at most 1 MiB.
    @Test func contentHeldForAPageIsBounded() {
        var held = HeldBlocks(folder: "f")
        let tiny = Array(repeating: [UInt8(1)], count: WireLimits.maxIndexEntries)
        var frames = 0
        while held.cost + tiny.count * SharedFolder.heldCost(1) <= HeldBlocks.limit {
            held.append(tiny)
            frames += 1
        }
        let before = held.blocks.count
        held.append(tiny)
        held.append([[2]])
        #expect(held.blocks.count == before + 1 && held.blocks.count == frames * tiny.count + 1)
        #expect(held.cost <= HeldBlocks.limit && held.blocks.count < HeldBlocks.limit / 64)
        let blocks = (0..<700).map { Array(repeating: UInt8($0 & 0xFF), count: 4_000 + $0) }
        let cut = SharedFolder.indexBlockFrames(blocks, folder: "f")
        #expect(cut.count > 1)
        var joined: [[UInt8]] = []
        for case let .indexBlocks(folder, part) in cut {
            #expect(folder == "f" && part.reduce(0) { $0 + $1.count } <= SharedFolder.indexBlockFrameBytes)
            joined += part
        }
        #expect(joined == blocks)
    }

    /// Large blocks of unchanged files are streamed from the file into the channel
    /// (`SharedFolder.streamedBlock`), small ones read into memory: both arrive intact. A file
    /// of runs of one byte value has no content-defined cut, so its chunks all have the largest
    /// size; each run holds another value, so a block read at the wrong offset would not verify.
    @Test func largeBlocksAreStreamedAndArriveIntact() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/media"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try Data((0..<(2 << 20)).map { UInt8(1 + $0 >> 18) }).write(to: URL(fileURLWithPath: docs + "/runs.bin"))
        try TransferPair.randomFile(docs + "/random.bin", size: 3 << 19, seed: 5)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        let received = pair.bob.directory + "/media"
        try TransferPair.eventually("bob holds alice's files") { Self.contents(received) == Self.contents(docs) }
        let runs = try #require(try pair.alice.index.files(folderID: shared.folder, paths: ["runs.bin"])["runs.bin"])
        #expect(!runs.chunks.isEmpty && runs.chunks.allSatisfy { $0.size >= Int64(SharedFolder.streamedBlock) },
                "the test needs blocks that are streamed: \(runs.chunks.map(\.size))")
        let random = try #require(try pair.alice.index.files(folderID: shared.folder, paths: ["random.bin"])["random.bin"])
        #expect(random.chunks.contains { $0.size < Int64(SharedFolder.streamedBlock) })
        #expect(pair.bob.events.errors.isEmpty && pair.alice.events.errors.isEmpty, "\(pair.bob.events.errors) \(pair.alice.events.errors)")
    }

    /// A peer's folder ID becomes a name on our disk and in the index: one that is not a
    /// safe name is refused before it is stored or shown.
    // (An empty or over-long ID never gets this far: the frame decoder refuses it.)
    @Test(arguments: ["../etc", "a/b", "dir\\name"])
    func aShareOfferWithAnUnsafeFolderIDIsRefused(_ id: String) throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.connect()
        pair.alice.sendRaw([.shareOffer(folder: id, label: "docs")])
        try TransferPair.eventually("bob refuses it") { !pair.bob.events.errors.isEmpty }
        #expect(pair.bob.events.errors.first?.contains("invalid folder ID") == true, "\(pair.bob.events.errors)")
        #expect(try pair.bob.index.folderOffers().isEmpty && pair.bob.index.folders().isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.bob.directory).isEmpty)
    }

    /// A peer that is not a member asks for blocks of a folder, or a member asks for what is
    /// not shared: each request is answered "no", and when they pile up the user is told.
    @Test func blockRequestsForWhatIsNotSharedAreRefusedAndReported() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "secret".write(toFile: pair.alice.directory + "/outside.txt", atomically: false, encoding: .utf8)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("bob has joined") { (try? pair.bob.index.folders().count) == 1 }
        for n in 0..<FolderService.refusalsReported {
            let path = n.isMultiple(of: 2) ? "../outside.txt" : "missing.txt"
            pair.bob.sendRaw([.blockRequest(request: UInt32(1_000 + n), folder: shared.folder, path: path, offset: 0, size: 6,
                                            hash: [UInt8](repeating: 0, count: 32))])
        }
        try TransferPair.eventually("alice reports the probing") {
            pair.alice.events.all.contains { if case let .refused(refusal) = $0 { refusal.reason.contains("probing") } else { false } }
        }
    }

    /// Blocks asked for together (`requestBlocks`: one hop and one send for all) are each
    /// answered with their own bytes, and one asked of a device that is not connected gets
    /// nil without waiting for the others.
    @Test func blocksAskedForTogetherAreEachAnswered() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        let names = (0..<5).map { "f\($0).bin" }
        for (n, name) in names.enumerated() { try TransferPair.randomFile(docs + "/" + name, size: 3_000 + n, seed: 90 + UInt64(n)) }
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("bob has joined and alice has indexed the files") {
            (try? pair.bob.index.folders().count) == 1 && (try? pair.alice.index.files(folderID: shared.folder, paths: Set(names)))?.count == 5
        }
        let records = try pair.alice.index.files(folderID: shared.folder, paths: Set(names))
        let answers = Mutex<[String: BlockReply?]>([:])
        var wants: [BlockWant] = []
        for name in names {
            let chunk = try #require(records[name]?.chunks.first)
            wants.append(BlockWant(device: pair.alice.deviceKey, folder: shared.folder, path: name, offset: UInt64(chunk.offset),
                                   size: UInt32(chunk.size), hash: chunk.hash, sums: nil) { reply in answers.withLock { $0[name] = reply } })
        }
        wants.insert(BlockWant(device: "nobody", folder: shared.folder, path: names[0], offset: 0, size: 1, hash: [UInt8](repeating: 0, count: 32),
                               sums: nil) { reply in answers.withLock { $0["nobody"] = reply } }, at: 2)
        pair.bob.folders.requestBlocks(wants)
        try TransferPair.eventually("every block is answered") { answers.withLock { $0.count } == names.count + 1 }
        let got = answers.withLock { $0 }
        for name in names {
            let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: docs + "/" + name)))
            guard case let .whole(bytes)?? = got[name] else {
                Issue.record("\(name): no bytes")
                continue
            }
            #expect(bytes == file, "\(name)")
        }
        if case .some(.none) = got["nobody"] {} else { Issue.record("a device that is not connected: \(String(describing: got["nobody"]))") }
    }

    /// An answer longer than the block asked for is a lie, and is passed on empty (it then
    /// fails the hash) rather than hashed: a peer could otherwise answer each of 1,024 small
    /// blocks in flight with 16 MiB. An answer of the size asked for is passed on.
    @Test func anAnswerLongerThanTheBlockIsNotPassedOn() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.connect()
        // Bob's own service would refuse the request (no such folder): it waits, and the
        // answers below reach alice first.
        let hold = DispatchSemaphore(value: 0)
        pair.bob.queue.async { hold.wait() }
        defer { hold.signal() }
        let replies = Mutex<[Int: BlockReply?]>([:])
        for (n, answer) in [(1, 1 << 20), (2, 100)] {
            pair.alice.folders.requestBlock(device: pair.bob.deviceKey, folder: "abcde-fghij", path: "f\(n).bin", offset: 0, size: 100,
                                            hash: [UInt8](repeating: 0, count: 32), sums: nil) { reply in replies.withLock { $0[n] = reply } }
            var request: UInt32?
            try TransferPair.eventually("alice has asked") {
                request = pair.alice.sync { pair.alice.folders.state.withLock { $0.pendingBlocks.keys.max() } }
                return request != nil
            }
            pair.alice.receiveRaw([.blockResponse(request: try #require(request), ok: true, data: [UInt8](repeating: 7, count: answer))])
            try TransferPair.eventually("the answer is settled") { replies.withLock { $0[n] } != nil }
        }
        let got = replies.withLock { $0 }
        guard case let .whole(long)?? = got[1], case let .whole(right)?? = got[2] else {
            Issue.record("answers: \(got)")
            return
        }
        #expect(long.count == 0, "1 MiB for a block of 100 bytes")
        #expect(right.count == 100)
    }

    /// A delta request (the asker's sums of its own bytes at a chunk's range) is answered
    /// with the bitmap and only the blocks that differ: from memory for a small chunk, read
    /// from the file for a large one with a small answer, streamed from the file for a large
    /// answer (a file of runs of one byte value has no content-defined cut: its chunks all
    /// have the largest size). Once the session has made alice hash her allowance, a delta
    /// is answered unhashed: the whole chunk after a full bitmap. Sums of another count, or a
    /// chunk that is not shared, get "no" without a byte.
    @Test(arguments: ["small", "read", "streamed", "unhashed"])
    func aBlockDeltaRequestIsAnsweredWithOnlyTheBlocksThatDiffer(_ kind: String) throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        if kind == "small" {
            try TransferPair.randomFile(docs + "/big.bin", size: 2 << 20, seed: 40)
        } else {
            try Data((0..<(2 << 20)).map { UInt8(1 + $0 >> 18) }).write(to: URL(fileURLWithPath: docs + "/big.bin"))
        }
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("bob has joined and alice has indexed big.bin") {
            (try? pair.bob.index.folders().count) == 1 && (try? pair.alice.index.files(folderID: shared.folder, paths: ["big.bin"]))?["big.bin"] != nil
        }
        let record = try #require(try pair.alice.index.files(folderID: shared.folder, paths: ["big.bin"])["big.bin"])
        let large = Int64(SharedFolder.streamedBlock)
        let chunk = try #require(record.chunks.first { kind == "small" ? $0.size >= Int64(2 * BlockDelta.blockSize) && $0.size < large
                                                                         : $0.size >= large })
        let bytes = try ChunkReader(path: docs + "/big.bin").bytes(of: ChunkRef(offset: UInt64(chunk.offset), size: UInt32(chunk.size),
                                                                                   hash: try #require(ChunkHash(bytes: chunk.hash))))
        var own = bytes
        let changed = kind == "small" ? [1] : kind == "read" ? [1, BlockDelta.blockCount(size: own.count) - 1]
                                                            : Array(0..<BlockDelta.blockCount(size: own.count))
        for block in changed { own[min(own.count - 1, block * BlockDelta.blockSize + 3)] ^= 1 }
        if kind == "unhashed" {
            own = bytes   // nothing differs, but nothing is compared either
            // Taken an hour ahead: nothing refills while the test runs, however loaded the
            // machine (at 64 MiB/s, a slow ask found the chunk's worth refilled).
            #expect(pair.alice.folders.deltaAllowance.take(device: pair.bob.deviceKey, bytes: DeltaAllowance.capacity,
                                                           now: .now + .seconds(3_600)))
        }
        func ask(_ path: String, sums: [UInt8]) throws -> BlockReply? {
            let reply = Mutex<BlockReply??>(nil)
            pair.bob.folders.requestBlock(device: pair.alice.deviceKey, folder: shared.folder, path: path, offset: UInt64(chunk.offset),
                                          size: UInt32(chunk.size), hash: chunk.hash, sums: sums) { answer in reply.withLock { $0 = .some(answer) } }
            try TransferPair.eventually("alice answers") { reply.withLock { $0 } != nil }
            return reply.withLock { $0! }
        }
        guard case let .delta(answer) = try ask("big.bin", sums: BlockDelta.sums(own)) else {
            Issue.record("no delta answer")
            return
        }
        let carried = kind == "unhashed" ? bytes.count : changed.count * BlockDelta.blockSize
        #expect(answer.count == BlockDelta.bitmapSize(size: bytes.count) + carried)
        #expect((answer.count >= SharedFolder.streamedBlock) == (kind == "streamed" || kind == "unhashed"))
        var rebuilt = own
        #expect(BlockDelta.apply(answer, to: &rebuilt) == carried && rebuilt == bytes)
        #expect(try ask("big.bin", sums: Array(BlockDelta.sums(own).dropLast(8))) == nil, "one sum short")
        #expect(try ask("../outside.txt", sums: BlockDelta.sums(own)) == nil, "not shared")
    }

    /// A member's index entries are hostile input: one whose path leaves the folder is
    /// ignored (and said), the rest is stored.
    @Test func indexEntriesWithUnsafePathsAreIgnored() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("bob has joined") { (try? pair.bob.index.folders().count) == 1 }
        let entry = { (path: String) in
            SyncFileEntry(FileEntry(path: path, kind: .directory, mtimeNs: 1, mode: 0o755, version: [pair.bob.deviceKey: 1],
                                    modifiedBy: pair.bob.deviceKey, sequence: 1))
        }
        pair.bob.sendRaw([.indexUpdate(folder: shared.folder, full: false, entries: [entry("../escape"), entry("fine")])])
        try TransferPair.eventually("alice ignores the unsafe entry") { pair.alice.events.errors.contains { $0.contains("unsafe path") } }
        try TransferPair.eventually("the safe one is applied") {
            FileManager.default.fileExists(atPath: docs + "/fine")
        }
        #expect(!FileManager.default.fileExists(atPath: pair.alice.directory + "/escape"))
    }
    /// Entries whose manifests add up to more than a frame (16 MiB) reach the peer all the
    /// same: the sender pages by bytes. Before, a page of 1,000 entries over the limit was
    /// refused by the channel before sending and its entries never reached the peer (a
    /// folder of ~450 files of 1 GiB). The link here refuses frames as the channel does.
    @Test func entriesWithLargeManifestsArePagedByBytesAndAllGoOut() throws {
        // bob does not accept: alice sends her index to him as a member, and he only drops
        // it (no pulls of 480,000 chunks): what is checked is what alice put on the wire.
        let pair = try TransferPair(configureBob: { $0.autoAccept = false })
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/videos"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("alice's first scan is done") { (try? pair.alice.folders.folderStatus(.everything))?.items.first?.state == .idle }
        // 24 files of 20,000 chunks each: ~720 KB of manifest per entry, ~17 MB in all.
        var generator = SplitMix64(seed: 31)
        let records: [FileRecord] = (0..<24).map { n in
            let chunks = (0..<20_000).map { i in
                FileChunkRecord(offset: Int64(i) << 16, size: 1 << 16,
                                hash: withUnsafeBytes(of: (generator.next(), generator.next(), generator.next(), generator.next())) { Array($0) })
            }
            var record = FileRecord(folderID: shared.folder, FileEntry(path: "film-\(n).mkv", kind: .file, size: 20_000 << 16, mtimeNs: 1, mode: 0o644, version: [pair.alice.deviceKey: 1], modifiedBy: pair.alice.deviceKey), chunks: chunks)
            record.rootHash = record.chunkManifest!.rootHash
            return record
        }
        let total = records.map { FolderService.wireEntry($0).encodedSize }.reduce(0, +)
        #expect(total > WireLimits.maxFrameBody, "the entries must not fit one frame (\(total) bytes)")
        try pair.alice.index.upsertFiles(records)
        pair.alice.folders.folderChanged(shared.folder)
        try TransferPair.eventually("all 24 entries went out", timeout: 120) {
            Set(pair.alice.indexPathsSent.withLock { $0 }).count == 24 || !pair.alice.refusedFrames.withLock { $0 }.isEmpty
        }
        #expect(pair.alice.refusedFrames.withLock { $0 }.isEmpty, "\(pair.alice.refusedFrames.withLock { $0 })")
        #expect(Set(pair.alice.indexPathsSent.withLock { $0 }) == Set(records.map(\.path)))
    }

    /// The page is the longest prefix within the budget, never empty, in sequence order.
    @Test func anIndexPageIsTheLongestPrefixWithinItsBudget() {
        let entry = { (n: Int, manifest: Int) in
            SyncFileEntry(FileEntry(path: "f\(n)", kind: .file, size: 1, mtimeNs: 1, mode: 0o644, version: [:],
                                    modifiedBy: String(repeating: "A", count: 56), sequence: Int64(n)),
                          manifest: [UInt8](repeating: 0, count: manifest))
        }
        let entries = (1...10).map { entry($0, 1_000) }
        let one = entries[0].encodedSize
        #expect(FolderService.indexPage(entries, budget: 3 * one).map(\.sequence) == [1, 2, 3])
        #expect(FolderService.indexPage(entries, budget: 3 * one - 1).count == 2)
        #expect(FolderService.indexPage(entries, budget: 1).count == 1, "one entry always goes")
        #expect(FolderService.indexPage(entries, budget: .max).count == 10)
        #expect(FolderService.indexPage([], budget: 10).isEmpty)
        // The size is what the frame really takes.
        let frame = Frame.indexUpdate(folder: "abcde-fghij", full: false, entries: Array(entries.prefix(4)))
        var encoded: [UInt8] = []
        FrameEncoder.append(frame, to: &encoded)
        let overhead = encoded.count - 4 * one
        #expect(overhead > 0 && overhead < 64, "frame overhead \(overhead)")
    }
}

/// The allowance of hashing for delta answers, per session: a token bucket.
@Suite struct DeltaAllowanceTests {
    @Test func theBucketEmptiesAndRefillsAtItsRateUpToItsCapacity() {
        let start = ContinuousClock.now
        var bucket = DeltaAllowance.Bucket(tokens: 100, at: start)
        func take(_ bytes: Int, after seconds: Int) -> Bool {
            bucket.take(bytes, now: start + .seconds(seconds), capacity: 100, rate: 10)
        }
        #expect(take(60, after: 0))
        #expect(!take(60, after: 0), "40 left")
        #expect(!take(60, after: 1), "50 after a second")
        #expect(take(60, after: 2), "60 after two")
        #expect(!take(1, after: 2))
        #expect(take(100, after: 3600), "full after an hour")
        #expect(!take(101, after: 7200), "never more than the capacity")
    }

    @Test func eachDeviceHasItsOwn() {
        let allowance = DeltaAllowance()
        let now = ContinuousClock.now
        #expect(allowance.take(device: "A", bytes: DeltaAllowance.capacity, now: now))
        #expect(!allowance.take(device: "A", bytes: 1, now: now))
        #expect(allowance.take(device: "B", bytes: DeltaAllowance.capacity, now: now))
        #expect(!allowance.take(device: "A", bytes: 1, now: now - .seconds(1)), "an instant read earlier refills nothing")
        #expect(!allowance.take(device: "A", bytes: DeltaAllowance.rate + 1, now: now + .seconds(1)))
        #expect(allowance.take(device: "A", bytes: DeltaAllowance.rate, now: now + .seconds(1)), "a second refills its rate, once")
    }
}

/// The wire's limits for a delta request follow `BlockDelta`'s layout (two modules that
/// cannot see each other), and a request whose answer would not fit one frame is refused
/// before anything is read.
@Suite struct BlockDeltaLimitsTests {
    @Test func theWireLimitsAreTheLayoutsAndAnOversizedDeltaIsRefused() {
        #expect(WireLimits.maxDeltaSums == WireLimits.maxChunk / BlockDelta.blockSize)
        #expect(WireLimits.deltaSumSize == BlockDelta.sumSize)
        #expect(WireLimits.maxChunk == Manifest.maxChunkSize)
        func sums(_ size: Int) -> [UInt8] { [UInt8](repeating: 0, count: BlockDelta.blockCount(size: size) * BlockDelta.sumSize) }
        let largest = WireLimits.maxChunk - BlockDelta.bitmapSize(size: WireLimits.maxChunk)
        #expect(BlockAsk.validSums(sums(largest), size: UInt32(largest)))
        #expect(!BlockAsk.validSums(sums(largest + 1), size: UInt32(largest + 1)), "size + bitmap over one frame")
        #expect(!BlockAsk.validSums(sums(WireLimits.maxChunk), size: UInt32(WireLimits.maxChunk)))
        #expect(!BlockAsk.validSums([], size: 0), "an empty block")
        #expect(!BlockAsk.validSums(sums(100_000) + [0], size: 100_000), "a byte more than the sums")
    }
}
