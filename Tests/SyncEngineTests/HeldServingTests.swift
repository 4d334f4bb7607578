import Foundation
import PeerFiles
import PeerIndex
import PeerWire
@testable import SyncEngine
import Synchronization
import Testing

/// What a node serves of a file it is still fetching (fan-out, `HeldChunks`) follows the
/// folder's rules as they are at each request (review of issue 43.4), over the in-memory link:
/// bob pulls a file from alice, whose answers stall after a few chunks (`answerHold`), and
/// says which chunks he holds (`chunkHave`); alice, a member too, asks him for one of them.
@Suite struct HeldServingTests {
    /// Once bob's user ignores the file (by hand: the watcher's reload waits for the pull,
    /// which holds the folder's `io`; or with `ignores`, which no longer waits for it),
    /// deselects it (`select` waits for the pull to free what it leaves out, the rules do not),
    /// pauses the folder or unshares it, his chunk of it is refused, not served, and he tells alice at once
    /// that he holds none of it (an announcement with no bit set). Before, the chunk was served
    /// until the pull ended (and `ignores` waited for it), and alice was told nothing.
    @Test(arguments: ["ignored by hand", "ignored with the command", "deselected", "paused", "unshared"])
    func aChunkOfAFileBeingFetchedIsRefusedOnceTheRulesExcludeIt(_ change: String) throws {
        let pair = try TransferPair()
        let selecting = DispatchGroup()
        defer {
            // Bob's pull ends (its file placed; deselected, then removed) before the link does.
            pair.alice.releaseAnswers()
            selecting.wait()
            if change != "deselected" && change != "unshared" {
                try? TransferPair.eventually("bob's pull ends", timeout: 40) { FileManager.default.fileExists(atPath: pair.bob.directory + "/docs/big.bin") }
            }
            pair.finish()
        }
        pair.alice.speaksChunkHave.withLock { $0 = true }
        let (docs, folderID) = try pair.joinedFolder()
        let received = pair.bob.directory + "/docs"

        // 8 MiB of which alice answers 8 chunks: bob holds them, and waits for the rest.
        pair.alice.answerHold.withLock { $0.left = 8 }
        let staging = pair.alice.directory + "/big.staging"
        try TransferPair.randomFile(staging, size: 8 << 20, seed: 4341)
        let content = try [UInt8](Data(contentsOf: URL(fileURLWithPath: staging)))
        try FileManager.default.moveItem(atPath: staging, toPath: docs + "/big.bin")
        var held: Int?
        try TransferPair.eventually("bob says he holds a chunk of big.bin") {
            let bitmap = pair.bob.chunkHavesSent.withLock { $0.last { $0.path == "big.bin" }?.bitmap } ?? []
            held = (0..<bitmap.count * 8).first { bitmap[$0 / 8] & (1 << ($0 % 8)) != 0 }
            return held != nil
        }
        let record = try #require(try pair.alice.index.file(folderID: folderID, path: "big.bin"))
        let chunk = try #require(record.chunks.sorted { $0.offset < $1.offset }[try #require(held)])
        func ask() throws -> BlockReply? {
            let reply = Mutex<BlockReply??>(nil)
            pair.alice.folders.requestBlock(device: pair.bob.deviceKey, folder: folderID, path: "big.bin", offset: UInt64(chunk.offset),
                                            size: UInt32(chunk.size), hash: chunk.hash, sums: nil) { answer in reply.withLock { $0 = .some(answer) } }
            try TransferPair.eventually("bob answers") { reply.withLock { $0 } != nil }
            return reply.withLock { $0! }
        }
        guard case let .whole(bytes)? = try ask() else {
            Issue.record("bob did not serve a chunk he announced (the fan-out this test relies on)")
            return
        }
        #expect(bytes == Array(content[Int(chunk.offset)..<Int(chunk.offset + chunk.size)]))

        let folder = try #require(pair.bob.folders.state.withLock { $0.folders[folderID] })
        switch change {
        case "paused": _ = try pair.bob.folders.setPaused(directory: received, true)
        case "ignored with the command": _ = try pair.bob.folders.ignorePatterns(directory: received, replacingWith: "big.bin\n")
        case "deselected":
            // (It returns once the pull has ended: the selection holds from the start.)
            DispatchQueue.global().async(group: selecting) { _ = try? pair.bob.folders.select(directory: received, paths: ["other"]) }
            try TransferPair.eventually("bob's selection is in force") { !folder.held.isServing("big.bin") }
        case "unshared":
            // (It returns once the pull has ended: the folder is gone from the start.)
            DispatchQueue.global().async(group: selecting) { _ = try? pair.bob.folders.unshare(directory: received) }
            try TransferPair.eventually("bob's folder is unshared") { pair.bob.folders.state.withLock { $0.folders[folderID] == nil } }
        default: try "big.bin\n".write(toFile: received + "/" + IgnorePatterns.fileName, atomically: true, encoding: .utf8)
        }
        // Still fetching (bob waits for alice's answers): the change took effect during the pull.
        #expect(pair.bob.folders.state.withLock { !$0.pendingBlocks.isEmpty }, "the change waited for the pull to end")
        #expect(try ask() == nil, "a chunk of a file bob's folder no longer serves (\(change)) was served")
        // Still fetching: the refusal came from the rules, not from the pull's end.
        #expect(!FileManager.default.fileExists(atPath: received + "/big.bin"), "the pull ended before the test could check")
        try TransferPair.eventually("bob withdraws big.bin") {
            pair.bob.chunkHavesSent.withLock { $0.last { $0.path == "big.bin" }.map { !$0.bitmap.contains { $0 != 0 } } ?? false }
        }
        #expect(!folder.held.isServing("big.bin"))
    }

    /// A delta request for a chunk of a file being fetched makes us hash the chunk whole
    /// before it can be served, then again for the comparison: both are charged to the
    /// asker's delta allowance. With room for one hash only, the answer is the whole chunk
    /// (the asker pays on the wire); before, the first hash was free and the answer was a
    /// bitmap saying nothing differs.
    @Test func aDeltaOfAChunkBeingFetchedIsChargedForBothHashes() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        let shared = try pair.joinedFolder()
        // Alice is fetching incoming.bin: its temporary file (outside the folder) holds it all.
        let aside = pair.alice.directory + "/aside"
        try FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true)
        try TransferPair.randomFile(aside + "/incoming.tmp", size: 2 << 20, seed: 4342)
        let manifest = try FileChunker.manifest(ofFileAt: aside + "/incoming.tmp")
        let folder = try #require(pair.alice.folders.state.withLock { $0.folders[shared.folder] })
        folder.held.fetching(path: "incoming.bin", root: manifest.rootHash, chunks: manifest.chunks, missing: [],
                             directory: try DirectoryHandle(path: aside), temp: "incoming.tmp")
        let chunk = try #require(manifest.chunks.first { $0.size >= UInt32(2 * BlockDelta.blockSize) && BlockAsk.fitsDelta(Int($0.size)) })
        let bytes = try ChunkReader(path: aside + "/incoming.tmp").bytes(of: chunk)
        func ask() throws -> BlockReply? {
            let reply = Mutex<BlockReply??>(nil)
            pair.bob.folders.requestBlock(device: pair.alice.deviceKey, folder: shared.folder, path: "incoming.bin", offset: chunk.offset,
                                          size: chunk.size, hash: chunk.hash.bytes, sums: BlockDelta.sums(bytes)) { answer in
                reply.withLock { $0 = .some(answer) }
            }
            try TransferPair.eventually("alice answers") { reply.withLock { $0 } != nil }
            return reply.withLock { $0! }
        }
        let bitmap = BlockDelta.bitmapSize(size: bytes.count)
        guard case let .delta(compared) = try ask() else {
            Issue.record("no delta answer")
            return
        }
        #expect(compared.count == bitmap, "bob holds the same bytes: the bitmap alone")
        // Room for one hash of the chunk (taken an hour ahead: nothing refills meanwhile).
        let allowance = pair.alice.folders.deltaAllowance
        #expect(allowance.take(device: pair.bob.deviceKey, bytes: DeltaAllowance.capacity - bytes.count, now: .now + .seconds(3_600)))
        guard case let .delta(whole) = try ask() else {
            Issue.record("no delta answer")
            return
        }
        #expect(whole.count == bitmap + bytes.count, "a delta whose two hashes did not fit was compared (\(whole.count) bytes)")
        var rebuilt = bytes
        #expect(BlockDelta.apply(whole, to: &rebuilt) == bytes.count && rebuilt == bytes)
        #expect(!allowance.take(device: pair.bob.deviceKey, bytes: 1), "the allowance was not charged for the rehash")
    }
}
