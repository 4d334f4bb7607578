import Foundation
import PeerCrypto
import PeerFiles
import PeerModel
import PeerWire
import Testing

/// Growing files (issue 43.2, hello feature `growing-files`): a member's scan tells which
/// chunks of a large file it has hashed so far, and a receiver fetches them before the file's
/// index entry exists; its pull then takes them and fetches only the rest. Real daemons on
/// loopback; the hostile member is a `RogueSender` speaking the real frames.
@Suite(.serialized)
struct GrowingFileTests {
    typealias Sync = FolderSyncTests

    /// The temporary files below `folder` (ours and the prefetches').
    static func temporaries(_ folder: String) -> [String] {
        (FileManager.default.enumerator(atPath: folder)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".syncpeer-tmp") }
    }

    /// Alice's scan hashes a 40 MiB file (told of from 8 MiB on): bob and carol fetch part of
    /// it while it is hashed (`prefetchedBytes`: taken by their pulls from what they fetched
    /// before the entry came), and end with the whole file, verified, and no temporary left.
    /// Before, nothing was fetched before the entry (the field did not exist: 0).
    @Test func aLargeFileIsFetchedWhileItsSenderHashesIt() throws {
        let trio = try Sync.Trio(environment: Sync.environment.merging(["SYNCPEER_GROWING_FROM": String(8 << 20)]) { $1 })
        defer { trio.env.cleanup() }
        try "hello".write(toFile: trio.path("alice", "hello.txt"), atomically: true, encoding: .utf8)
        try trio.share()
        try Sync.eventually("the first sync") { Sync.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "hello.txt")) }

        let staging = trio.env.home("staging.bin")
        try TestFiles.random(staging, size: 40 << 20)
        let expected = try TestFiles.hash(staging)
        try FileManager.default.moveItem(atPath: staging, toPath: trio.path("alice", "big.bin"))
        try Sync.eventually("bob and carol have the file", timeout: 120) {
            ["bob", "carol"].allSatisfy { (try? TestFiles.hash(trio.path($0, "big.bin"))) == expected }
        }
        let ahead = try ["bob", "carol"].map { try Sync.figure(trio, $0 == "bob" ? trio.bob : trio.carol, "prefetchedBytes") }
        print("aLargeFileIsFetchedWhileItsSenderHashesIt: prefetched bob \(ahead[0]), carol \(ahead[1]) of \(40 << 20)")
        #expect(ahead.reduce(0, +) > 0, "nothing was fetched before the entry: \(ahead)")
        #expect(ahead.allSatisfy { $0 <= 40 << 20 })
        try Sync.eventually("the folder is the same everywhere\n\(Sync.describe(trio))") { Sync.converged(trio) }
        for node in ["bob", "carol"] { #expect(Self.temporaries(trio.folders[node]!).isEmpty, "\(node) kept a temporary") }
    }

    /// A hostile member's announcements: twenty files of 1 TiB that never end get at most 4
    /// files fetched, at most 16 MiB asked of each at once, and their temporaries are removed
    /// once it stops announcing (`SYNCPEER_PREFETCH_EXPIRY_MS`). Then a file whose entry
    /// differs from what was announced (it changed while hashed): its pull keeps only the
    /// fetched chunks that are its own, fetches the other, and the file is the entry's.
    @Test func announcementsAreBoundedAndOnlyTheEntrysChunksAreKept() throws {
        let bob = try HostileBob(autoAccept: true, environment: ["SYNCPEER_PREFETCH_EXPIRY_MS": "3000"])
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogue(name: "rogue-grower", features: ["messages", "growing-files"])
        defer { rogue.close() }
        let folderID = "growi-ngone"
        try rogue.send(.shareOffer(folder: folderID, label: "grow"))
        _ = try bob.daemon.waitFor("share_offer") { $0["folder"] as? String == folderID }
        // (Accepted at once when its folders switch is on; else by the user.)
        let accepted = try bob.env.cli(bob.daemon, ["accept", folderID])
        let answer = try rogue.take { if case .shareAnswer(folderID, _, _) = $0 { true } else { false } }
        try #require(answer == .shareAnswer(folder: folderID, accepted: true, reason: ""), "\(answer) \(accepted.stderr)")
        let folder = bob.receive + "/grow"
        try Sync.eventually("the folder exists") { FileManager.default.fileExists(atPath: folder) }
        Thread.sleep(forTimeInterval: 0.5)   // (its ignore patterns load on its queue)

        let mib = UInt32(1 << 20)
        let fake = (0..<64).map { _ in GrowingChunk(size: mib, hash: (0..<32).map { _ in UInt8.random(in: 0...255) }) }
        for n in 0..<20 {
            try rogue.send(.growingFile(folder: folderID, path: "huge-\(n).bin", scan: UInt64(n + 1), size: 1 << 40, offset: 0, chunks: fake))
        }
        var asked: [String: UInt64] = [:]
        while let frame = try? rogue.take(within: 3, where: { if case .blockRequest = $0 { true } else { false } }),
              case let .blockRequest(_, _, path, _, size, _) = frame {
            asked[path, default: 0] += UInt64(size)
        }
        print("announcementsAreBounded: asked \(asked)")
        #expect(!asked.isEmpty && asked.count <= 4, "\(asked)")
        #expect(asked.values.allSatisfy { $0 <= 16 << 20 }, "\(asked)")
        #expect(Self.temporaries(folder).count <= 4, "\(Self.temporaries(folder))")
        try Sync.eventually("the unfinished files' temporaries are removed", timeout: 20) { Self.temporaries(folder).isEmpty }

        // Announced: three chunks; the entry then: the first and last of them and another.
        let announced = try ForgedFile(chunkSizes: [1 << 20, 1 << 20, 1 << 20])
        let final = try ForgedFile(chunks: [announced.chunks[0], try ForgedFile(chunkSizes: [1 << 20]).chunks[0], announced.chunks[2]])
        try rogue.send(.growingFile(folder: folderID, path: "data.bin", scan: 99, size: 3 << 20, offset: 0,
                                    chunks: announced.manifest.chunks.map { GrowingChunk(size: $0.size, hash: $0.hash.bytes) }))
        for _ in 0..<3 {
            let frame = try rogue.take { if case .blockRequest(_, _, "data.bin", _, _, _) = $0 { true } else { false } }
            guard case let .blockRequest(id, _, _, offset, _, _) = frame else { continue }
            try rogue.send(.blockResponse(request: id, ok: true, data: announced.chunks[Int(offset >> 20)]))
        }
        Thread.sleep(forTimeInterval: 0.5)   // (written on bob's side)
        // Before its entry, bob's status lists the file as pulled: 3 MiB told, 3 MiB fetched.
        let ahead = try bob.status()["folders"] as? [[String: Any]]
        let shown = (ahead?.first?["transfers"] as? [[String: Any]])?.first { $0["path"] as? String == "data.bin" }
        #expect((shown?["needed"] as? NSNumber)?.intValue == 3 << 20 && (shown?["fetched"] as? NSNumber)?.intValue == 3 << 20
                && (shown?["percent"] as? NSNumber)?.intValue == 100, "\(String(describing: ahead))")
        let device = DeviceID(publicKey: rogue.keyPair.publicKey).compact
        try rogue.send(.indexUpdate(folder: folderID, full: true,
                                    entries: [HostileFolderTests.entry("data.bin", final, sequence: 1, device: device)]))
        let arrived = folder + "/data.bin"
        let deadline = Date().addingTimeInterval(30)
        while (try? Data(contentsOf: URL(fileURLWithPath: arrived))) != Data(final.content) && Date() < deadline {
            guard let frame = try? rogue.take(within: 0.2, where: { if case .blockRequest(_, _, "data.bin", _, _, _) = $0 { true } else { false } }),
                  case let .blockRequest(id, _, _, offset, _, _) = frame else { continue }
            #expect(offset == 1 << 20, "asked again for a chunk fetched ahead (at \(offset))")
            try rogue.send(.blockResponse(request: id, ok: true, data: final.chunks[Int(offset >> 20)]))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: arrived)) == Data(final.content))
        let status = try bob.status()
        let prefetched = ((status["folders"] as? [[String: Any]])?.first?["prefetchedBytes"] as? NSNumber)?.intValue
        #expect(prefetched == 2 << 20, "\(status)")
        #expect(Self.temporaries(folder).isEmpty, "\(Self.temporaries(folder))")
        #expect(bob.daemon.process.isRunning)
    }
}
