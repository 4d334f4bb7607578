import Foundation
import Testing
import PeerFiles
import PeerWire
import Synchronization

/// Issue 41, hostile input: a peer that is not a member of a folder learns nothing of its
/// versions and gets none of their chunks, even a paired peer that is a member of another
/// folder; a member's listing is what it asked for.
@Suite struct HostileVersionsTests {
    @Test func aNonMemberGetsNoHistoryAndNoVersionChunks() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        for name in ["alice-recv", "bob-recv", "docs", "other"] {
            try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true)
        }
        let docs = env.home("docs")
        let alice = try FolderSyncTests.Trio.daemon(env, "alice", environment: FolderSyncTests.environment)
        let bob = try FolderSyncTests.Trio.daemon(env, "bob", environment: FolderSyncTests.environment)
        defer { alice.stop(); bob.stop() }
        _ = try env.pair(alice, bob, autoAccepted: true)
        let secret = Array("password=hunter2-correct-horse".utf8)
        try Data(secret).write(to: URL(fileURLWithPath: docs + "/secret.txt"))
        let shared = try VersionsTests.json(env, alice, ["share", docs, "--with", "bob"])
        let folderID = try #require(shared["folder"] as? String)
        let bobCopy = env.home("bob-recv") + "/docs/secret.txt"
        try FolderSyncTests.eventually("secret.txt reaches bob", timeout: 30) { VersionsTests.bytes(bobCopy) == secret }
        // Alice replaces it: bob keeps the secret as a version.
        try "nothing to see".write(toFile: docs + "/secret.txt", atomically: true, encoding: .utf8)
        try FolderSyncTests.eventually("the edit reaches bob", timeout: 30) { VersionsTests.bytes(bobCopy) == Array("nothing to see".utf8) }
        // A member sees it (so there is something to refuse).
        let history = try VersionsTests.json(env, alice, ["history", docs + "/secret.txt"])
        #expect((history["versions"] as? [[String: Any]] ?? []).contains { $0["deviceName"] as? String == "bob" && $0["held"] as? Bool == true },
                "\(history)")

        // A paired peer that is not a member of the folder.
        let rogue = try RogueSender(port: bob.port, name: "rogue")
        defer { rogue.close() }
        try rogue.expectPairedByAutoAccept()
        try bob.waitForState("connected", peer: "rogue")
        func ask(_ folder: String, _ path: String, tree: Bool, version: UInt64 = 0) throws -> (ok: Bool, data: [UInt8]) {
            let request = UInt32.random(in: 1...UInt32.max)
            try rogue.send(.versionRequest(request: request, folder: folder, path: path, tree: tree, before: 0, version: version))
            let answer = try rogue.take { if case .versionResponse(request, _, _) = $0 { true } else { false } }
            guard case let .versionResponse(_, ok, data) = answer else { return (false, []) }
            return (ok, data)
        }
        for (path, tree) in [("secret.txt", false), ("/", true), ("secret.txt", true)] {
            let answer = try ask(folderID, path, tree: tree)
            #expect(!answer.ok && answer.data.isEmpty, "a non-member was answered for \(path)")
        }
        for id in 1...5 { #expect(try !ask(folderID, "secret.txt", tree: false, version: UInt64(id)).ok, "version \(id)") }
        #expect(try rogue.block(folderID, "secret.txt", 0, UInt32(secret.count), ChunkHash.of(secret).bytes) == nil,
                "a non-member got a version's chunk")

        // A member of another folder of bob's: still nothing of this one; its own folder
        // answers (with no versions).
        let other = try VersionsTests.json(env, bob, ["share", env.home("other"), "--with", "rogue"])
        let otherID = try #require(other["folder"] as? String)
        _ = try rogue.take { if case .shareOffer = $0 { true } else { false } }
        try rogue.send(.shareAnswer(folder: otherID, accepted: true, reason: ""))
        try FolderSyncTests.eventually("the rogue is a member of the other folder", timeout: 10) {
            (try? ask(otherID, "/", tree: true))?.ok == true
        }
        #expect(try VersionPage.decode(try ask(otherID, "/", tree: true).data).entries.isEmpty)
        #expect(try !ask(folderID, "secret.txt", tree: false).ok)
        #expect(try rogue.block(folderID, "secret.txt", 0, UInt32(secret.count), ChunkHash.of(secret).bytes) == nil)
        // Asking for the secret's chunk through its own folder: not a chunk of that folder.
        #expect(try rogue.block(otherID, "secret.txt", 0, UInt32(secret.count), ChunkHash.of(secret).bytes) == nil)
        // Nor the secret's version by its ID through its own folder, nor by a path leaving it.
        for id in 1...5 {
            for (path, tree) in [("secret.txt", false), ("/", true)] {
                let answer = try ask(otherID, path, tree: tree, version: UInt64(id))
                let listed = answer.ok ? try VersionPage.decode(answer.data).entries.count : -1
                #expect(listed == 0, "version \(id) of another folder: \(answer.ok ? "\(listed) listed" : "refused")")
            }
        }
        for path in ["../docs/secret.txt", "../docs", "/secret.txt"] {
            #expect(try !ask(otherID, path, tree: path != "/secret.txt").ok, "a path leaving the folder was answered: \(path)")
        }
        #expect(bob.process.isRunning)
    }

    /// A member that lists versions with paths leaving the folder ("../", absolute) has them
    /// dropped before they are shown or restored; its other versions are listed.
    @Test func aMembersVersionsWithEscapingPathsAreDropped() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        for name in ["alice-recv", "docs"] { try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true) }
        let docs = env.home("docs")
        let alice = try FolderSyncTests.Trio.daemon(env, "alice", environment: FolderSyncTests.environment)
        defer { alice.stop() }
        let rogue = try RogueSender(port: alice.port, name: "rogue")
        defer { rogue.close() }
        try rogue.expectPairedByAutoAccept()
        try alice.waitForState("connected", peer: "rogue")
        let shared = try VersionsTests.json(env, alice, ["share", docs, "--with", "rogue"])
        let folderID = try #require(shared["folder"] as? String)
        _ = try rogue.take { if case .shareOffer = $0 { true } else { false } }
        try rogue.send(.shareAnswer(folder: folderID, accepted: true, reason: ""))
        try FolderSyncTests.eventually("the rogue is a member", timeout: 10) {
            ((try? VersionsTests.json(env, alice, ["status"]))?["folders"] as? [[String: Any]])?.first?["peers"] != nil
        }
        // alice asks; the rogue answers with one honest-looking version and three that leave the folder.
        let asked = DispatchQueue(label: "test.history")
        let answer = Mutex<SyncpeerRunner.Result?>(nil)
        asked.async { answer.withLock { $0 = try? env.cli(alice, ["history", docs, "--json"]) } }
        let request = try rogue.take(within: 15) { if case .versionRequest = $0 { true } else { false } }
        guard case let .versionRequest(id, _, _, _, _, _) = request else { return }
        func entry(_ n: UInt64, _ path: String) -> VersionEntry {
            VersionEntry(id: n, path: path, keptAt: 1_764_950_400_000, size: 3, mtimeNs: 0, modifiedBy: "ROGUE", reason: "peer-edit", held: true,
                         rootHash: [UInt8](repeating: 1, count: 32))
        }
        let page = VersionPage(entries: [entry(1, "ok.txt"), entry(2, "../escape.txt"), entry(3, "a/../../escape.txt"), entry(4, "/etc/passwd")],
                               more: false)
        try rogue.send(.versionResponse(request: id, ok: true, data: page.encoded()))
        try FolderSyncTests.eventually("history answered", timeout: 15) { answer.withLock { $0 } != nil }
        let result = try #require(answer.withLock { $0 })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stderr)")
        let paths = (object["versions"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        #expect(paths == ["ok.txt"], "\(paths)")
    }
}
