import PeerModel
import Dispatch
import Foundation
import PeerCrypto
import PeerFiles
import PeerIndex
import PeerWire
@testable import SyncEngine
import Synchronization
import Testing

/// A shared folder on its own (issue 12): no node, no sessions, no processes. The folder
/// reaches the engine only through `FolderHost`; here that is an in-memory index and a
/// block source reading a "remote" directory, with real files and inotify.
@Suite struct FolderHostTests {
    /// `FolderHost` with an in-memory index; blocks come from `remoteRoot`, through `serve`.
    final class Host: FolderHost, @unchecked Sendable {
        // @unchecked: `serve` is set before the folder starts; the rest is immutable or locked.
        let localDevice = String(repeating: "L", count: 56)
        let index: NodeIndex
        let queue = DispatchQueue(label: "test.folder-host")
        let remoteDevice = String(repeating: "R", count: 56)
        let remoteRoot: String
        let changes = Mutex<[String]>([])
        let errors = Mutex<[String]>([])
        let requests = Mutex(0)
        var serve: @Sendable ([UInt8]) -> [UInt8]? = { $0 }
        /// Room for two blocks of 4 KiB (a test's own, not shared with tests running beside it).
        let indexBlockBudget = IndexBlockBudget(limit: 2 * SharedFolder.heldCost(4_096))
        var versions: VersionKeeper? = nil

        init(remoteRoot: String) throws {
            index = try NodeIndex.inMemory()
            self.remoteRoot = remoteRoot
        }

        func folderChanged(_ folderID: String) { changes.withLock { $0.append(folderID) } }
        func emitFolder(_ folder: SharedFolder, reason: String?) {}
        func emitFile(_ folder: SharedFolder, _ path: String, _ state: NodeEvent.FileSyncState,
                      bytes: Int64?, total: Int64?, copy: String?, reason: String?) {}
        func emitError(_ peer: PeerRef?, _ reason: String) { errors.withLock { $0.append(reason) } }
        /// Devices connected besides `remoteDevice`: their block requests are refused.
        var alsoConnected: Set<String> = []
        func connectedDevices() -> Set<String> { alsoConnected.union([remoteDevice]) }

        /// Delta requests: how many came, and what their answers carried in all.
        let deltas = Mutex((requests: 0, carried: 0))
        /// Answers a delta request (given the served bytes and the sums); nil: answered whole
        /// (a peer without `block-delta`).
        var serveDelta: (@Sendable ([UInt8], [UInt8]) -> [UInt8]?)? = { BlockDelta.answer(chunk: $0, sums: $1) }

        func requestBlocks(_ wants: [BlockWant]) {
            for want in wants {
                answer(device: want.device, path: want.path, offset: want.offset, size: want.size, sums: want.sums, callback: want.callback)
            }
        }

        private func answer(device: String, path: String, offset: UInt64, size: UInt32, sums: [UInt8]?,
                           callback: @escaping @Sendable (BlockReply?) -> Void) {
            requests.withLock { $0 += 1 }
            let file = remoteRoot + "/" + path
            let (serve, serveDelta) = (self.serve, self.serveDelta)
            DispatchQueue.global().async {
                guard device == self.remoteDevice, let handle = FileHandle(forReadingAtPath: file) else { return callback(nil) }
                defer { try? handle.close() }
                try? handle.seek(toOffset: offset)
                let bytes = (try? handle.read(upToCount: Int(size))).map { [UInt8]($0) } ?? []
                guard let served = serve(bytes) else { return callback(nil) }
                if let sums, let serveDelta {
                    let answer = serveDelta(served, sums)
                    self.deltas.withLock { $0.requests += 1; $0.carried += max(0, (answer?.count ?? 0) - BlockDelta.bitmapSize(size: Int(size))) }
                    return callback(answer.map(BlockReply.delta))
                }
                callback(.whole(served))
            }
        }
    }

    /// A folder shared with the remote device, its root and the remote's files in temporary directories.
    struct Fixture {
        let host: Host
        let root: String
        let folderID = "abcde-fghij"

        init() throws {
            let base = NSTemporaryDirectory() + "folder-host-\(UUID().uuidString)"
            root = base + "/local"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: base + "/remote", withIntermediateDirectories: true)
            host = try Host(remoteRoot: base + "/remote")
            _ = try host.index.addFolder(id: folderID, path: root, label: "docs")
            try host.index.upsertPeer(PeerRecord(deviceID: host.remoteDevice, name: "remote", publicKey: [UInt8](repeating: 1, count: 32),
                                                 trust: .paired, firstSeen: 1))
            try host.index.addFolderPeer(folderID: folderID, deviceID: host.remoteDevice)
        }

        func cleanup() { try? FileManager.default.removeItem(atPath: (root as NSString).deletingLastPathComponent) }

        /// The remote device announces `path` (written in its directory: `content`, or random
        /// bytes) at version 1, or `version`.
        @discardableResult
        func remoteHas(_ path: String, size: Int, seed: UInt64, version: [String: UInt64]? = nil, mode: UInt32 = 0o644,
                       content: Data? = nil) throws -> Data {
            let file = host.remoteRoot + "/" + path
            if let content { try content.write(to: URL(fileURLWithPath: file)) } else { try TransferPair.randomFile(file, size: size, seed: seed) }
            let entry = try PreparedOffer.build(path: file, name: nil, kind: .file).offer.entries[0]
            let manifest = try Manifest.decode(entry.manifest)
            try host.index.upsertRemoteFiles(folderID: folderID, deviceID: host.remoteDevice, [
                RemoteFileRecord(FileEntry(path: path, kind: .file, size: Int64(size), mtimeNs: 1_700_000_000_000_000_000, mode: mode, version: VersionVector(version ?? [host.remoteDevice: 1]), rootHash: manifest.rootHash, modifiedBy: host.remoteDevice, sequence: 1), manifest: entry.manifest),
            ], receivedSequence: 1)
            return try Data(contentsOf: URL(fileURLWithPath: file))
        }

        func start() -> SharedFolder {
            let folder = SharedFolder(id: folderID, root: root, label: "docs", host: host)
            folder.start(rescanInterval: .seconds(3600), watchDelay: .milliseconds(50))
            return folder
        }

        /// A started folder whose first scan is done and announced.
        func startSettled() throws -> SharedFolder {
            let folder = start()
            try TransferPair.eventually("the first scan is done") { folder.status == .idle }
            Thread.sleep(forTimeInterval: 0.3)
            return folder
        }

        /// How many times the folder told the host its index changed.
        var announcements: Int { host.changes.withLock { $0.count } }

        /// Whether the folder holds `path` with `content` (nil: reads nothing there).
        func holds(_ path: String, _ content: Data?) -> Bool {
            (try? Data(contentsOf: URL(fileURLWithPath: root + "/" + path))) == content
        }

        /// The remote announces first.bin and second.bin in two pages of 3/4 of `pullBytes`
        /// each, queued while `io` is busy: two pulls, the first ending while the second
        /// waits. `between` runs on `io` after the first pull. Returns both files' content.
        func twoPulls(_ folder: SharedFolder, seed: UInt64, between: (@Sendable () -> Void)? = nil) throws -> (Data, Data) {
            let busy = DispatchSemaphore(value: 0)
            folder.io.async { busy.wait() }
            let first = try remoteHas("first.bin", size: 5_000, seed: seed)
            folder.pullSoon(["first.bin"], bytes: SharedFolder.pullBytes * 3 / 4)
            let second = try remoteHas("second.bin", size: 5_000, seed: seed + 1)
            folder.pullSoon(["second.bin"], bytes: SharedFolder.pullBytes * 3 / 4)
            if let between { folder.io.async(execute: between) }
            busy.signal()
            return (first, second)
        }

        /// What the folder holds (but its marker, `.syncpeer-folder`).
        var names: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).filter { $0 != ".syncpeer-folder" }.sorted() }
    }

    @Test func aScanRecordsLocalFilesAsThisDevicesChangesAndTellsTheHost() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        try "hello".write(toFile: fixture.root + "/a.txt", atomically: false, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: fixture.root + "/sub", withIntermediateDirectories: true)
        try "deep".write(toFile: fixture.root + "/sub/b.txt", atomically: false, encoding: .utf8)
        let folder = fixture.start()
        defer { folder.stop() }
        try TransferPair.eventually("the scan records three entries") {
            ((try? fixture.host.index.files(folderID: fixture.folderID)) ?? []).count == 3
        }
        let records = try fixture.host.index.files(folderID: fixture.folderID)
        #expect(Set(records.map(\.path)) == ["a.txt", "sub", "sub/b.txt"])
        #expect(records.allSatisfy { $0.version == [fixture.host.localDevice: 1] && $0.modifiedBy == fixture.host.localDevice })
        try TransferPair.eventually("the host hears of the change") { fixture.host.changes.withLock { $0.contains(fixture.folderID) } }
        // A later edit, seen by the watcher, bumps this device's counter.
        try "hello again".write(toFile: fixture.root + "/a.txt", atomically: false, encoding: .utf8)
        try TransferPair.eventually("the edit is recorded") {
            (try? fixture.host.index.file(folderID: fixture.folderID, path: "a.txt"))??.version == [fixture.host.localDevice: 2]
        }
    }

    /// Records with stale hashes (protocol 3's SHA-256, not rehashed at start): the
    /// first scan hashes the files again; one still of the recorded size, mtime and mode
    /// keeps its version (no edit for peers to see), one that changed gets this device's
    /// counter as any edit. Neither is offered as a manifest before.
    @Test func theFirstScanRehashesStaleRecordsKeepingTheVersionOfUnchangedFiles() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        try TransferPair.randomFile(fixture.root + "/same.bin", size: 300_000, seed: 5)
        try TransferPair.randomFile(fixture.root + "/edited.bin", size: 40_000, seed: 6)
        let old: [String: UInt64] = [fixture.host.remoteDevice: 4]
        let stale = try ["same.bin", "edited.bin"].map {
            try ContentHashUpgradeTests.oldRecord(folderID: fixture.folderID, root: fixture.root, path: $0, version: old)
        }
        _ = try fixture.host.index.upsertFiles(stale)
        #expect(try fixture.host.index.files(folderID: fixture.folderID).allSatisfy { $0.manifest == nil && $0.hasStaleHashes })
        try TransferPair.randomFile(fixture.root + "/edited.bin", size: 41_000, seed: 7)
        let folder = fixture.start()
        defer { folder.stop() }
        try TransferPair.eventually("both records hold BLAKE3 hashes") {
            ((try? fixture.host.index.files(folderID: fixture.folderID)) ?? []).allSatisfy { !$0.hasStaleHashes }
        }
        let same = try #require(try fixture.host.index.file(folderID: fixture.folderID, path: "same.bin"))
        #expect(same.rootHash == (try FileChunker.manifest(ofFileAt: fixture.root + "/same.bin")).rootHash)
        #expect(same.version.counters == old, "unchanged on disk: no edit recorded")
        #expect(same.inode != nil)
        let edited = try #require(try fixture.host.index.file(folderID: fixture.folderID, path: "edited.bin"))
        #expect(edited.rootHash == (try FileChunker.manifest(ofFileAt: fixture.root + "/edited.bin")).rootHash)
        #expect(edited.version[fixture.host.localDevice] != nil && edited.version[fixture.host.remoteDevice] == 4,
                "changed on disk: an edit of this device on top of the old version, \(edited.version)")
    }

    @Test func aRemoteFileIsPulledBlockByBlockVerifiedAndPlaced() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let content = try fixture.remoteHas("photo.raw", size: 3 << 20, seed: 11)
        let folder = fixture.start()
        defer { folder.stop() }
        do {
            try TransferPair.eventually("photo.raw is placed", timeout: 30) { fixture.names == ["photo.raw"] }
        } catch {
            Issue.record("names \(fixture.names); errors \(fixture.host.errors.withLock { $0 }); failing \(folder.failing.list(limit: 5).map(\.reason)); requests \(fixture.host.requests.withLock { $0 })")
            throw error
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.root + "/photo.raw")) == content)
        #expect(fixture.host.requests.withLock { $0 } > 1, "fetched in blocks")
        // The file is renamed into place before its record is written: wait for the record.
        try TransferPair.eventually("photo.raw is recorded", timeout: 30) {
            ((try? fixture.host.index.file(folderID: fixture.folderID, path: "photo.raw")) ?? nil) != nil
        }
        let record = try #require(try fixture.host.index.file(folderID: fixture.folderID, path: "photo.raw"))
        #expect(record.version == [fixture.host.remoteDevice: 1] && record.modifiedBy == fixture.host.remoteDevice)
    }

    /// Small files whose content came with the peer's index page (`indexBlocks`) are written
    /// from it: no block is asked for them. A file of the same page without content is
    /// asked for as before, and a page's blocks that no entry wants change nothing. Pages
    /// that wait hold their blocks within the host's budget: a page beyond it keeps its
    /// paths, and its file is asked for. Once the pulls are done, nothing is held.
    @Test func contentThatCameWithTheIndexIsWrittenWithoutARequest() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let folder = try fixture.startSettled()
        defer { folder.stop() }
        let remote = fixture.host.remoteDevice
        let small = try fixture.remoteHas("small.txt", size: 4_096, seed: 21)
        let other = try fixture.remoteHas("other.txt", size: 3_000, seed: 22)
        let stray = Array(repeating: UInt8(7), count: 4_000)
        let late = try fixture.remoteHas("late.txt", size: 4_096, seed: 23)
        let busy = DispatchSemaphore(value: 0)
        folder.io.async { busy.wait() }
        // First page: small.txt's content and a stray block (the budget's room for two);
        // second page: late.txt's, beyond the budget.
        folder.pullSoon(["small.txt", "other.txt"], bytes: 1_000, blocks: [
            ChunkHash.of([UInt8](small)): IndexBlock(device: remote, bytes: [UInt8](small)),
            ChunkHash.of(stray): IndexBlock(device: remote, bytes: stray),
        ])
        #expect(fixture.host.indexBlockBudget.current == SharedFolder.heldCost(4_096) + SharedFolder.heldCost(4_000))
        folder.pullSoon(["late.txt"], bytes: 500, blocks: [ChunkHash.of([UInt8](late)): IndexBlock(device: remote, bytes: [UInt8](late))])
        busy.signal()
        try TransferPair.eventually("the files are placed") {
            fixture.holds("small.txt", small) && fixture.holds("other.txt", other) && fixture.holds("late.txt", late)
        }
        #expect(fixture.host.requests.withLock { $0 } == 2, "other.txt and late.txt were asked for")
        let received = folder.activity.snapshot.received[remote] ?? 0
        #expect(received == 2 * 4_096 + 3_000, "what came with the index counts as received from its peer")
        try TransferPair.eventually("the pulls gave back what they held") { fixture.host.indexBlockBudget.current == 0 }
    }

    /// A whole pass (a folder's first pull, a rescan) that runs while a page waits plans that
    /// page's entries too: it takes the page's blocks, so nothing is asked for, and gives
    /// back what they held.
    @Test func aWholePassTakesTheBlocksOfWaitingPages() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let folder = try fixture.startSettled()
        defer { folder.stop() }
        let small = try fixture.remoteHas("small.txt", size: 4_096, seed: 31)
        let busy = DispatchSemaphore(value: 0)
        folder.io.async { busy.wait() }
        folder.io.async { folder.pull(paths: nil) }
        folder.pullSoon(["small.txt"], bytes: 500, blocks: [
            ChunkHash.of([UInt8](small)): IndexBlock(device: fixture.host.remoteDevice, bytes: [UInt8](small)),
        ])
        busy.signal()
        try TransferPair.eventually("small.txt is placed") { fixture.holds("small.txt", small) }
        try TransferPair.eventually("the pulls gave back what they held") { fixture.host.indexBlockBudget.current == 0 }
        #expect(fixture.host.requests.withLock { $0 } == 0)
    }

    /// Two files of one content in one page: both are written from its one block.
    @Test func filesOfOneContentShareItsBlock() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let folder = try fixture.startSettled()
        defer { folder.stop() }
        let content = Data((0..<4_096).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try fixture.remoteHas("one.txt", size: 4_096, seed: 0, content: content)
        try fixture.remoteHas("two.txt", size: 4_096, seed: 0, content: content)
        folder.pullSoon(["one.txt", "two.txt"], bytes: 500, blocks: [
            ChunkHash.of([UInt8](content)): IndexBlock(device: fixture.host.remoteDevice, bytes: [UInt8](content)),
        ])
        try TransferPair.eventually("both are placed") { fixture.holds("one.txt", content) && fixture.holds("two.txt", content) }
        #expect(fixture.host.requests.withLock { $0 } == 0)
        try TransferPair.eventually("the pull gave back what it held") { fixture.host.indexBlockBudget.current == 0 }
    }

    /// A pull of many files, in several batches: a file of a later batch whose content a local
    /// file had when the pull was planned must not be copied from that file once an earlier
    /// batch of the same pull has replaced it (and recorded the new content) — the chunk's
    /// location, looked up before, is stale. Every file ends up with exactly the remote's bytes.
    /// (The mode change of g-meta.bin, applied at once, places and records the first batch
    /// before z-copy.bin is prepared, whatever the timing.)
    @Test func aLaterBatchNeverCopiesAChunkFromAFileAnEarlierBatchReplaced() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let size = 200_000
        try TransferPair.randomFile(fixture.root + "/a-edited.bin", size: size, seed: 100)
        try TransferPair.randomFile(fixture.root + "/g-meta.bin", size: 1_000, seed: 102)
        let folder = fixture.start()
        try TransferPair.eventually("a-edited.bin and g-meta.bin are recorded") {
            ((try? fixture.host.index.files(folderID: fixture.folderID)) ?? []).count == 2
        }
        folder.stop()
        // The remote edited a-edited.bin (it had our version), changed g-meta.bin's mode, and
        // adds a copy of a-edited.bin's old content after more than a batch of other files.
        let ours: [String: UInt64] = [fixture.host.localDevice: 1, fixture.host.remoteDevice: 1]
        var expected: [String: Data] = [:]
        expected["a-edited.bin"] = try fixture.remoteHas("a-edited.bin", size: size, seed: 101, version: ours)
        // The first batch (a-edited.bin and the first others) is sealed when it holds as many
        // files as a batch takes here (descriptors count: it depends on the open-file limit);
        // z-copy.bin's chunks are looked up at the start of its window of actions, after that
        // seal and before g-meta.bin's change places and records the batch.
        let others = min(FolderApplier.batchFiles, FolderApplier.batchDescriptors) + 200
        for i in 0..<others {
            let name = String(format: "f%04d.bin", i)
            expected[name] = try fixture.remoteHas(name, size: 1_000, seed: 1_000 + UInt64(i))
        }
        expected["g-meta.bin"] = try fixture.remoteHas("g-meta.bin", size: 1_000, seed: 102, version: ours, mode: 0o600)
        expected["z-copy.bin"] = try fixture.remoteHas("z-copy.bin", size: size, seed: 100)
        let again = fixture.start()
        defer { again.stop() }
        try TransferPair.eventually("every file is placed", timeout: 60) {
            fixture.names.filter { !$0.hasPrefix(".") }.count == others + 3
                && fixture.holds("a-edited.bin", expected["a-edited.bin"])
        }
        for (name, content) in expected {
            #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.root + "/" + name)) == content, "\(name)")
        }
    }

    /// Blocks that fail verification, or a source that is gone: nothing is placed, no
    /// temporary file is left in the folder, and the path is listed as failing (retried later).
    @Test(arguments: ["corrupt", "gone"])
    func aPullFromABadSourcePlacesNothingAndSaysWhichPath(_ fault: String) throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        if fault == "corrupt" {
            fixture.host.serve = { bytes in
                var changed = bytes
                if !changed.isEmpty { changed[0] ^= 0xFF }
                return changed
            }
        } else {
            fixture.host.serve = { _ in nil }
        }
        _ = try fixture.remoteHas("contract.pdf", size: 500_000, seed: 12)
        let folder = fixture.start()
        defer { folder.stop() }
        try TransferPair.eventually("contract.pdf is listed as failing") {
            folder.failing.list(limit: 10).contains { $0.path == "contract.pdf" }
        }
        #expect(!fixture.names.contains("contract.pdf"))
        // What was fetched may be kept for the retry, only ever under a hidden temporary name.
        #expect(fixture.names.allSatisfy { $0.hasPrefix(".") && $0.hasSuffix(IgnorePatterns.temporarySuffix) }, "\(fixture.names)")
        #expect(try fixture.host.index.file(folderID: fixture.folderID, path: "contract.pdf") == nil)
    }

    /// A file we hold an older version of, changed in place by the remote: each chunk we
    /// lack is asked for as a delta against our own bytes at its range, and only the changed
    /// 16 KiB blocks come over. A peer that answers a delta with wrong bytes costs a whole
    /// request (the rebuilt chunk fails its hash), not a failure; a peer without
    /// `block-delta` is asked for whole chunks. Every way, the file ends up as the remote's.
    @Test(arguments: ["delta", "lying", "whole"])
    func aFileChangedInPlaceIsRebuiltFromTheChangedBlocks(_ peer: String) throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        switch peer {
        case "lying":
            fixture.host.serveDelta = { chunk, sums in
                guard var answer = BlockDelta.answer(chunk: chunk, sums: sums) else { return nil }
                answer[answer.count - 1] ^= 0xFF
                return answer
            }
        case "whole": fixture.host.serveDelta = nil
        default: break
        }
        let size = 2 << 20
        try TransferPair.randomFile(fixture.root + "/big.bin", size: size, seed: 30)
        let folder = fixture.start()
        try TransferPair.eventually("big.bin is recorded") {
            ((try? fixture.host.index.file(folderID: fixture.folderID, path: "big.bin")) ?? nil) != nil
        }
        folder.stop()
        let old = try FileChunker.manifest(ofFileAt: fixture.root + "/big.bin")
        var content = try Data(contentsOf: URL(fileURLWithPath: fixture.root + "/big.bin"))
        let changes = [100_000, size / 2, size - 10]
        for offset in changes { content[offset] ^= 0x77 }
        let ours: [String: UInt64] = [fixture.host.localDevice: 1, fixture.host.remoteDevice: 1]
        try fixture.remoteHas("big.bin", size: size, seed: 0, version: ours, content: content)
        let new = try FileChunker.manifest(ofFileAt: fixture.host.remoteRoot + "/big.bin")
        let lacking = new.chunks.filter { chunk in !old.chunks.contains { $0.hash == chunk.hash } }
        let again = fixture.start()
        defer { again.stop() }
        try TransferPair.eventually("big.bin is the remote's", timeout: 30) {
            fixture.holds("big.bin", content)
        }
        let deltas = fixture.host.deltas.withLock { $0 }
        let asDeltas = lacking.filter { $0.size >= BlockDelta.minimumChunk }
        print("aFileChangedInPlaceIsRebuiltFromTheChangedBlocks(\(peer)): lacking \(lacking.map(\.size)), deltas \(deltas)")
        #expect(!asDeltas.isEmpty, "the test needs chunks large enough for a delta: \(lacking.map(\.size))")
        switch peer {
        case "whole":
            #expect(deltas.requests == 0)
        case "lying":
            #expect(deltas.requests == asDeltas.count, "each delta once, then the chunk whole")
        default:
            #expect(deltas.requests == asDeltas.count)
            // One changed block per change, against whole chunks of 16 KiB … 256 KiB.
            #expect(deltas.carried <= changes.count * BlockDelta.blockSize, "carried \(deltas.carried)")
            #expect(deltas.carried < asDeltas.reduce(0) { $0 + Int($1.size) } / 2)
        }
        #expect(!again.failing.list(limit: 10).contains { $0.path == "big.bin" })
        // The new version is swapped in (RENAME_EXCHANGE) and the old one, now at the
        // temporary's name, is checked and then removed: read right after the swap, the
        // folder still held it (a failure in ~1 of 10 runs).
        try TransferPair.eventually("no temporary left: \(fixture.names)", timeout: 10) { fixture.names == ["big.bin"] }
    }

    /// Index pages that arrive while a pull runs wait and are pulled together, whole and in
    /// order, up to `pullBatch` paths and `pullBytes`: before, each page was a pull of its own, and each pull
    /// ends by waiting for its last fetches, barriers and records (B: 12 pulls for 10,000
    /// files, 2.46 → 2.19 s together).
    @Test func changesThatArriveDuringAPullArePulledTogether() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let folder = fixture.start()
        defer { folder.stop() }
        try TransferPair.eventually("the first scan is done") { folder.status == .idle }
        let before = folder.peerPulls
        // The folder's io is busy (as with a pull) while three pages arrive.
        let busy = DispatchSemaphore(value: 0)
        folder.io.async { busy.wait() }
        var expected: [String: Data] = [:]
        for page in 0..<3 {
            let name = "page\(page).bin"
            expected[name] = try fixture.remoteHas(name, size: 5_000, seed: 60 + UInt64(page))
            folder.pullSoon([PathKey(name)])
        }
        busy.signal()
        try TransferPair.eventually("every page's file is placed") {
            expected.allSatisfy { fixture.holds($0.key, $0.value) }
        }
        #expect(folder.peerPulls - before == 1, "one pull for the three pages, not \(folder.peerPulls - before)")

        // Whole pages, in order, up to `pullBatch` paths: a page of 3/4 of it alone, then the
        // next such page with the last one (a real file, placed).
        let again = folder.peerPulls
        folder.io.async { busy.wait() }
        let half = SharedFolder.pullBatch * 3 / 4
        folder.pullSoon(Set((0..<half).map { PathKey("a\($0)") }))
        folder.pullSoon(Set((0..<half).map { PathKey("b\($0)") }))
        expected["last.bin"] = try fixture.remoteHas("last.bin", size: 5_000, seed: 70)
        folder.pullSoon(["last.bin"])
        busy.signal()
        try TransferPair.eventually("last.bin is placed") {
            fixture.holds("last.bin", expected["last.bin"])
        }
        #expect(folder.peerPulls - again == 2, "\(folder.peerPulls - again) pulls")

        // And up to `pullBytes` of entries: two pages of one large entry each go in two pulls.
        let third = folder.peerPulls
        folder.io.async { busy.wait() }
        folder.pullSoon(["c0"], bytes: SharedFolder.pullBytes * 3 / 4)
        expected["large.bin"] = try fixture.remoteHas("large.bin", size: 5_000, seed: 80)
        folder.pullSoon(["large.bin"], bytes: SharedFolder.pullBytes * 3 / 4)
        busy.signal()
        try TransferPair.eventually("large.bin is placed") {
            fixture.holds("large.bin", expected["large.bin"])
        }
        #expect(folder.peerPulls - third == 2, "\(folder.peerPulls - third) pulls")
    }

    /// What a pull changed is announced to the peers (`folderChanged`) once no more pulls
    /// wait, not after each pull: each peer stores and plans what we echo. B: the echo of
    /// bob's second pull (2,400 files) took ~0.1 s of alice's CPU during his last pull; the
    /// deferral gave 1.56 → 1.31 s (tmpfs, 6 pairs). A pull that ends with pages waiting
    /// leaves its announcement to the last one (or to the timer, see below).
    @Test func aPullWithMorePullsWaitingLeavesItsAnnouncementToTheLast() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let folder = try fixture.startSettled()
        defer { folder.stop() }
        let (announced, pulls) = (fixture.announcements, folder.peerPulls)
        let (first, second) = try fixture.twoPulls(folder, seed: 90)
        try TransferPair.eventually("both files are placed and announced") {
            fixture.holds("first.bin", first) && fixture.holds("second.bin", second) && fixture.announcements > announced
        }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(folder.peerPulls - pulls == 2, "\(folder.peerPulls - pulls) pulls")
        #expect(fixture.announcements - announced == 1, "announced \(fixture.announcements - announced) times for two pulls")
    }

    /// An announcement owed while pulls wait goes after `announceDelay` at the latest, also
    /// while the next pull has not ended (here: `io` is held up after the first pull).
    @Test func anOwedAnnouncementWaitsAtMostTheDelay() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let folder = try fixture.startSettled()
        defer { folder.stop() }
        let announced = fixture.announcements
        let held = DispatchSemaphore(value: 0)
        defer { held.signal() }
        let (first, _) = try fixture.twoPulls(folder, seed: 92, between: { held.wait() })
        try TransferPair.eventually("first.bin is placed") { fixture.holds("first.bin", first) }
        try TransferPair.eventually("the first pull is announced while the second waits", timeout: 10) {
            fixture.announcements > announced
        }
    }

    /// A check of the in-flight budget (`FolderApplier.noWait`) returns at once when it is
    /// used up. With `.now()` as the timeout, the wait slept in the kernel until that
    /// deadline had passed: ~80 µs and a context switch each time (B: ~140 a run, on `io`).
    @Test func aCheckOfTheBudgetNeverSleeps() {
        func voluntarySwitches() -> Int {
            var usage = rusage()
            getrusage(__rusage_who_t(1), &usage)  // RUSAGE_THREAD
            return usage.ru_nvcsw
        }
        let empty = DispatchSemaphore(value: 0)
        let before = voluntarySwitches()
        for _ in 0..<100 { #expect(empty.wait(timeout: FolderApplier.noWait) == .timedOut) }
        #expect(voluntarySwitches() - before < 10, "\(voluntarySwitches() - before) sleeps for 100 checks")
    }
}
