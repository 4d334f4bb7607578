import Foundation
import Testing

/// Issue 45, point 1: a conflict is settled by whose version to keep, never by where the
/// versions lie, and the dropped version is kept under the home, not deleted.
@Suite struct ConflictResolveTests {
    /// alice and bob, with alice's folder shared to bob, and a conflict on notes.txt that
    /// alice's (newer) edit wins: on bob the file holds alice's text and the copy tagged
    /// with bob's own ID holds bob's edit — the case where "Keep mine" deleted bob's edit.
    final class Pair {
        let env: SyncpeerRunner
        var alice: DaemonProcess
        let bob: DaemonProcess
        let aliceFolder: String, bobFolder: String

        init() throws {
            env = try SyncpeerRunner()
            for name in ["alice-recv", "bob-recv", "docs"] {
                try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true)
            }
            aliceFolder = env.home("docs")
            bobFolder = env.home("bob-recv") + "/docs"
            alice = try FolderSyncTests.Trio.daemon(env, "alice", environment: FolderSyncTests.environment)
            bob = try FolderSyncTests.Trio.daemon(env, "bob", environment: FolderSyncTests.environment)
            _ = try env.pair(alice, bob, autoAccepted: true)
            try "v1".write(toFile: aliceFolder + "/notes.txt", atomically: true, encoding: .utf8)
            let shared = try env.cli(alice, ["share", aliceFolder, "--with", "bob"])
            try #require(shared.status == 0, "\(shared.stderr)")
            try FolderSyncTests.eventually("notes.txt reaches bob") { (try? String(contentsOfFile: bobFolder + "/notes.txt", encoding: .utf8)) == "v1" }
            // Both edit while apart; bob's edit is dated 2023, so alice's wins.
            alice.stop()
            try "bob v2".write(toFile: bobFolder + "/notes.txt", atomically: true, encoding: .utf8)
            try TestFiles.setMtime(bobFolder + "/notes.txt", 1_700_000_000_000_000_000)
            try "alice's text".write(toFile: aliceFolder + "/notes.txt", atomically: true, encoding: .utf8)
            alice = try FolderSyncTests.Trio.daemon(env, "alice", environment: FolderSyncTests.environment, home: alice.home, listen: alice.address)
            try FolderSyncTests.eventually("one conflict copy on both, alice's text at the path", timeout: 45) {
                [aliceFolder, bobFolder].allSatisfy { folder in
                    copies(folder).count == 1 && (try? String(contentsOfFile: folder + "/notes.txt", encoding: .utf8)) == "alice's text"
                }
            }
        }

        func copies(_ folder: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.contains(".sync-conflict-") }
        }

        func stop() {
            alice.stop()
            bob.stop()
            env.cleanup()
        }
    }

    @Test func keepingBobsVersionOnBobKeepsBobsTextEverywhereAndAlicesAside() throws {
        let pair = try Pair()
        defer { pair.stop() }
        let env = pair.env, bob = pair.bob
        let copy = try #require(pair.copies(pair.bobFolder).first)
        #expect(try String(contentsOfFile: pair.bobFolder + "/" + copy, encoding: .utf8) == "bob v2")

        // conflicts names each version by the device that wrote it.
        let listed = try env.cli(bob, ["conflicts", "--json"])
        try #require(listed.status == 0, "\(listed.stderr)")
        let item = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any], "\(listed.stdout)")
        let document = try JSONDocument()
        #expect(document.problems(item, as: "command conflicts").isEmpty, "\(document.problems(item, as: "command conflicts"))")
        #expect(item["original"] as? String == pair.bobFolder + "/notes.txt")
        let versions = item["versions"] as? [[String: Any]] ?? []
        let byName = Dictionary(versions.map { ($0["name"] as? String ?? "?", $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byName["alice"]?["path"] as? String == pair.bobFolder + "/notes.txt", "\(versions)")
        #expect(byName["alice"]?["size"] as? Int == "alice's text".utf8.count)
        #expect(byName["alice"]?["local"] as? Bool == false)
        #expect(byName["bob"]?["path"] as? String == pair.bobFolder + "/" + copy, "\(versions)")
        #expect(byName["bob"]?["local"] as? Bool == true)
        #expect(byName["bob"]?["time"] as? Int == 1_700_000_000_000)
        let text = try env.cli(bob, ["conflicts"])
        #expect(text.stdout.contains("alice's") && text.stdout.contains("bob (this device)'s"), "\(text.stdout)")

        // A device that wrote no version is refused, naming the choices.
        let wrong = try env.cli(bob, ["resolve", pair.bobFolder + "/notes.txt", "--keep", "carol"])
        #expect(wrong.status != 0)
        #expect(wrong.stderr.contains("alice") && wrong.stderr.contains("bob") && wrong.stderr.contains("both"), "\(wrong.stderr)")
        #expect(pair.copies(pair.bobFolder).count == 1)

        // Keep bob's: bob's text goes to the path on both devices; alice's is kept on bob.
        let resolved = try env.cli(bob, ["resolve", pair.bobFolder + "/notes.txt", "--keep", "bob", "--json"])
        try #require(resolved.status == 0, "\(resolved.stderr)")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(resolved.stdout.utf8)) as? [String: Any])
        #expect(result["name"] as? String == "bob")
        #expect(document.problems(result, as: "command resolve").isEmpty, "\(document.problems(result, as: "command resolve"))")
        for folder in [pair.bobFolder, pair.aliceFolder] {
            try FolderSyncTests.eventually("bob's text at the path and no copy in \(folder)") {
                pair.copies(folder).isEmpty && (try? String(contentsOfFile: folder + "/notes.txt", encoding: .utf8)) == "bob v2"
            }
        }
        // Alice's is kept in bob's versions store, and the result says how to get it back.
        let kept = try #require((result["versions"] as? [String])?.first, "\(result)")
        #expect((result["restore"] as? String)?.hasPrefix("syncpeer restore ") == true, "\(result)")
        let restored = try env.cli(bob, ["restore", pair.bobFolder + "/notes.txt", "--version", kept, "--to", pair.bobFolder + "/alice.txt"])
        try #require(restored.status == 0, "\(restored.stderr)")
        #expect(try String(contentsOfFile: pair.bobFolder + "/alice.txt", encoding: .utf8) == "alice's text")
    }

    /// `local` is the version this device wrote, wherever it lies; `remote` the one other
    /// device's.
    @Test func localAndRemoteAreChosenByAuthor() throws {
        let pair = try Pair()
        defer { pair.stop() }
        // On alice, "local" is alice's text (the file); "remote" would be bob's (the copy).
        let resolved = try pair.env.cli(pair.alice, ["resolve", pair.aliceFolder + "/notes.txt", "--keep", "remote"])
        try #require(resolved.status == 0, "\(resolved.stderr)")
        #expect(resolved.stdout.contains("kept bob's version"), "\(resolved.stdout)")
        try FolderSyncTests.eventually("bob's text everywhere") {
            [pair.aliceFolder, pair.bobFolder].allSatisfy { folder in
                pair.copies(folder).isEmpty && (try? String(contentsOfFile: folder + "/notes.txt", encoding: .utf8)) == "bob v2"
            }
        }
        // Kept in the versions store only (its chunks under .chunks), no whole copy beside it:
        // `history` lists the version from there.
        let copies = try FileManager.default.subpathsOfDirectory(atPath: pair.alice.home + "/versions").filter { !$0.hasPrefix(".chunks") }
            .map { pair.alice.home + "/versions/" + $0 }.filter { (try? String(contentsOfFile: $0, encoding: .utf8)) == "alice's text" }
        #expect(copies.isEmpty, "\(copies)")
        let history = try VersionsTests.json(pair.env, pair.alice, ["history", pair.aliceFolder + "/notes.txt"])
        #expect((history["versions"] as? [[String: Any]] ?? []).contains {
            $0["local"] as? Bool == true && $0["reason"] as? String == "conflict" && $0["held"] as? Bool == true
                && $0["size"] as? Int == "alice's text".utf8.count
        }, "\(history)")
    }
}
