import Foundation
import PeerFiles
import PeerModel
import PeerWire
import TestKit
import Testing

/// A shared file that rots under an unchanged stamp (a byte flipped in place, its mtime put
/// back: size, mtime and inode are those the index recorded) against a real `syncpeer daemon`,
/// asked by a member speaking the real frames (`RogueSender`). What bob SENDS is checked, not
/// what a receiver places (a receiver verifies anyway): the damaged chunk is refused, as a
/// plain request, a delta request and content sent with an index page, however often it is
/// asked; the intact chunks are still served; and the user is told, once per file, in
/// `events` and `status`.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ServedDamageTests {
    /// A large chunk (read at its turn to be sent, straight into the session's buffer) and a
    /// small one (read when the request is served).
    @Test(arguments: [("large.bin", true), ("small.bin", false)])
    func aRottenChunkIsRefusedAndTheUserIsTold(file: String, streamed: Bool) throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let docs = bob.env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        // One byte repeated: FastCDC finds no cut, every chunk has the largest size (256 KiB
        // for a file of 1 MiB). Random bytes: chunks around 64 KiB.
        if streamed {
            try Data(repeating: 0x61, count: 1 << 20).write(to: URL(fileURLWithPath: docs + "/" + file))
        } else {
            try TestFiles.random(docs + "/" + file, size: 600_000)
        }
        let rogue = try bob.pairedRogue(name: "rogue-member")
        defer { rogue.close() }
        let folderID = try Self.join(bob, docs, rogue)
        let index = try HostileFolderTests.collectIndex(rogue, folder: folderID, until: [file])
        let chunks = try Manifest.decode(try #require(index[file]).manifest).chunks
        let large = { (chunk: ChunkRef) in chunk.size >= 256 << 10 }
        let rotten = try #require(chunks.dropFirst().first { large($0) == streamed }, "\(chunks)")
        let intact = try #require(chunks.first { $0.offset != rotten.offset && large($0) == streamed })
        let before = try #require(try rogue.block(folderID, file, rotten.offset, rotten.size, rotten.hash.bytes))

        try #require(DiskRot.flip(docs + "/" + file, at: Int(rotten.offset) + Int(rotten.size / 2)))
        for _ in 0..<20 {
            #expect(try rogue.block(folderID, file, rotten.offset, rotten.size, rotten.hash.bytes) == nil, "served the rotten chunk")
        }
        // A delta against other content: every block differs, so the answer would carry them all.
        let sums = BlockDelta.sums([UInt8](repeating: 0, count: Int(rotten.size)))
        #expect(try rogue.delta(folderID, file, rotten, sums: sums) == nil, "served the rotten chunk as a delta")
        #expect(try rogue.block(folderID, file, intact.offset, intact.size, intact.hash.bytes) != nil, "an intact chunk is refused")
        #expect(before.count == Int(rotten.size))

        // Told once (not once per request), then that no peer has this version to repair it from.
        try FolderSyncTests.eventually("the damage is reported", timeout: 10) {
            bob.daemon.events("error").contains { $0.reason.contains("\(file) is damaged and not repaired") }
        }
        let found = bob.daemon.events("error").filter { $0.reason.contains("\(file) is damaged") }
        #expect(found.count == 2, "\(found.map(\.reason))")
        let folders = try #require(try bob.status()["folders"] as? [[String: Any]])
        let shown = try #require(folders.first { $0["folder"] as? String == folderID })
        #expect(shown["damaged"] as? Int == 1 && shown["damagedPaths"] as? [String] == [file], "\(shown)")
        let text = try bob.env.cli(bob.daemon, ["status"]).stdout
        #expect(text.contains("1 file(s) damaged on disk") && text.contains("    \(file)\n"), "\(text)")
        #expect(bob.daemon.process.isRunning)
    }

    /// A member that holds the file's version (its index lists bob's very entry) repairs it:
    /// the rotten chunk is refused, bob fetches it from the member (verified, as any pull),
    /// keeps what he found in the versions store, says so, and serves the intact chunk again.
    @Test func aRottenFileIsRepairedFromAMemberThatHasItsVersion() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let docs = bob.env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        // Four chunks of 256 KiB, each of one byte repeated: none can be rebuilt from another.
        let content = (0..<4).flatMap { [UInt8](repeating: 0x61 + UInt8($0), count: 256 << 10) }
        try Data(content).write(to: URL(fileURLWithPath: docs + "/large.bin"))
        let rogue = try bob.pairedRogue(name: "rogue-member")
        defer { rogue.close() }
        let folderID = try Self.join(bob, docs, rogue)
        var entry = try #require(try HostileFolderTests.collectIndex(rogue, folder: folderID, until: ["large.bin"])["large.bin"])
        let rotten = try #require(try Manifest.decode(entry.manifest).chunks.last)
        let intact = try #require(try rogue.block(folderID, "large.bin", rotten.offset, rotten.size, rotten.hash.bytes))
        entry.entry.sequence = 1
        try rogue.send(.indexUpdate(folder: folderID, full: true, entries: [entry]))
        try FolderSyncTests.eventually("bob knows the member holds it", timeout: 10) {
            let folders = (try? bob.status()["folders"] as? [[String: Any]]) ?? []
            let peers = folders.first { $0["folder"] as? String == folderID }?["peers"] as? [[String: Any]] ?? []
            return peers.contains { $0["indexReceived"] as? Bool == true }
        }

        try #require(DiskRot.flip(docs + "/large.bin", at: Int(rotten.offset) + 1_000))
        #expect(try rogue.block(folderID, "large.bin", rotten.offset, rotten.size, rotten.hash.bytes) == nil, "served the rotten chunk")
        // Bob's repair asks the member for the chunk.
        let asked = try rogue.take(within: 10) { if case .blockRequest = $0 { true } else { false } }
        guard case let .blockRequest(id, _, path, offset, _, _) = asked else { return }
        #expect(path == "large.bin" && offset == rotten.offset)
        try rogue.send(.blockResponse(request: id, ok: true, data: intact))
        try FolderSyncTests.eventually("the repair is reported", timeout: 10) {
            bob.daemon.events("error").contains { $0.reason.contains("large.bin was damaged and is repaired from a peer") }
        }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: docs + "/large.bin"))) == content)
        #expect(try rogue.block(folderID, "large.bin", rotten.offset, rotten.size, rotten.hash.bytes) == intact)
    }

    /// A small file's content goes with bob's index page (hello feature `index-blocks`) only
    /// where it still hashes to what the index recorded: the rotten file's is left out (and
    /// said), the intact one's is sent.
    @Test func aRottenSmallFileIsNotSentWithTheIndex() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let docs = bob.env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        let note = Array("a note that will rot on the disk\n".utf8), fine = Array("a note that stays as it was\n".utf8)
        try Data(note).write(to: URL(fileURLWithPath: docs + "/note.txt"))
        try Data(fine).write(to: URL(fileURLWithPath: docs + "/fine.txt"))
        let rogue = try bob.pairedRogue(name: "rogue-member", features: ["messages", "index-blocks"])
        defer { rogue.close() }
        let folderID = try Self.join(bob, docs, rogue) {
            // Indexed first; then rotten, before the index page (and its content) is sent.
            try FolderSyncTests.eventually("docs is scanned", timeout: 10) {
                let folders = (try? bob.status()["folders"] as? [[String: Any]]) ?? []
                return folders.contains { $0["path"] as? String == docs && $0["files"] as? Int == 2 }
            }
            try #require(DiskRot.flip(docs + "/note.txt", at: 3))
        }
        _ = try HostileFolderTests.collectIndex(rogue, folder: folderID, until: ["note.txt", "fine.txt"])
        var sent: [[UInt8]] = []
        while let frame = try? rogue.take(within: 0.5, where: { if case .indexBlocks = $0 { true } else { false } }),
              case let .indexBlocks(_, blocks) = frame {
            sent += blocks
        }
        #expect(sent.contains(fine), "the intact file's content was not sent with the index: \(sent.count) block(s)")
        var rotten = note
        rotten[3] ^= 0x40
        #expect(!sent.contains(rotten), "the rotten file's content was sent with the index")
        try FolderSyncTests.eventually("the damage is reported", timeout: 10) {
            bob.daemon.events("error").contains { $0.reason.contains("note.txt is damaged") }
        }
    }

    /// Shares `docs` with the rogue and accepts (after `beforeAccepting`); the folder's ID.
    static func join(_ bob: HostileBob, _ docs: String, _ rogue: RogueSender, beforeAccepting: () throws -> Void = {}) throws -> String {
        let shared = try bob.env.cli(bob.daemon, ["share", docs, "--with", "rogue-member", "--json"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let offer = try rogue.take { if case .shareOffer = $0 { true } else { false } }
        guard case let .shareOffer(folderID, _) = offer else { throw CocoaError(.featureUnsupported) }
        try beforeAccepting()
        try rogue.send(.shareAnswer(folder: folderID, accepted: true, reason: ""))
        return folderID
    }
}

extension RogueSender {
    /// Asks for a delta of a block against `sums`; the answer's bytes, or nil when refused.
    func delta(_ folder: String, _ path: String, _ chunk: ChunkRef, sums: [UInt8]) throws -> [UInt8]? {
        let request = UInt32.random(in: 1...UInt32.max)
        try send(.blockDeltaRequest(request: request, folder: folder, path: path, offset: chunk.offset, size: chunk.size,
                                    hash: chunk.hash.bytes, sums: sums))
        let answer = try take { if case .blockResponse(request, _, _) = $0 { true } else { false } }
        guard case let .blockResponse(_, ok, data) = answer else { return nil }
        return ok ? data : nil
    }
}
