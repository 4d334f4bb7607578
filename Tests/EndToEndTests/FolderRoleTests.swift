import Foundation
import PeerCrypto
@testable import PeerNet
import PeerModel
import PeerWire
import Testing

/// Issue 41, points 3 and 5, with real daemons on loopback: roles per peer per folder hold in
/// both directions (a conflict included) and against a peer's claims, deletions stay off an
/// archive, and a peer's mass change waits for the user at its threshold and not below.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct FolderRoleTests {
    /// alice shares `docs` (holding `files`) with bob, who accepts it into bob-recv/docs.
    final class Pair {
        let env: SyncpeerRunner
        let alice: DaemonProcess, bob: DaemonProcess
        let aliceFolder: String, bobFolder: String

        init(files: [String: String], shareArguments: [String] = []) throws {
            env = try SyncpeerRunner()
            for name in ["alice-recv", "bob-recv", "docs"] {
                try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true)
            }
            aliceFolder = env.home("docs")
            bobFolder = env.home("bob-recv") + "/docs"
            for (name, text) in files { try text.write(toFile: aliceFolder + "/" + name, atomically: true, encoding: .utf8) }
            alice = try FolderSyncTests.Trio.daemon(env, "alice", environment: FolderSyncTests.environment)
            bob = try FolderSyncTests.Trio.daemon(env, "bob", environment: FolderSyncTests.environment)
            _ = try env.pair(alice, bob, autoAccepted: true)
            let shared = try env.cli(alice, ["share", aliceFolder, "--with", "bob"] + shareArguments)
            try #require(shared.status == 0, "\(shared.stderr)")
            try FolderSyncTests.eventually("every file reaches bob") {
                files.allSatisfy { (try? String(contentsOfFile: bobFolder + "/" + $0.key, encoding: .utf8)) == $0.value }
            }
        }

        func text(_ folder: String, _ name: String) -> String? { try? String(contentsOfFile: folder + "/" + name, encoding: .utf8) }

        func names(_ folder: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
        }

        /// `syncpeer changes DIR --json` on `daemon`: path → kind.
        func changes(_ daemon: DaemonProcess, _ folder: String) throws -> [String: String] {
            let result = try env.cli(daemon, ["changes", folder, "--json"])
            try #require(result.status == 0, "\(result.stderr)")
            var found: [String: String] = [:]
            for line in result.stdout.split(separator: "\n") {
                let item = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                found[item["path"] as? String ?? "?"] = item["kind"] as? String
            }
            return found
        }

        func write(_ folder: String, _ name: String, _ text: String, mtime: Int64? = nil) throws {
            try text.write(toFile: folder + "/" + name, atomically: true, encoding: .utf8)
            if let mtime { try TestFiles.setMtime(folder + "/" + name, mtime) }
        }

        func stop() {
            alice.stop()
            bob.stop()
            env.cleanup()
        }

        /// The version of `path` that `daemon` replaced is kept once in its versions store
        /// (`history` lists it with `reason`, `restore --version` gives back `text`) and
        /// nowhere else under its home (no whole copy beside the store).
        func expectKeptOnlyInTheStore(_ daemon: DaemonProcess, _ path: String, reason: String, text: String) throws {
            let history = try VersionsTests.json(env, daemon, ["history", path])
            let kept = (history["versions"] as? [[String: Any]] ?? []).filter {
                $0["local"] as? Bool == true && $0["size"] as? Int == text.utf8.count
            }
            #expect(kept.count == 1 && kept.first?["reason"] as? String == reason && kept.first?["held"] as? Bool == true, "\(history)")
            if let id = kept.first?["id"] as? String {
                let copy = env.home("restored-" + id)
                _ = try VersionsTests.json(env, daemon, ["restore", path, "--version", id, "--to", copy])
                #expect((try? String(contentsOfFile: copy, encoding: .utf8)) == text)
            }
            let whole = try FileManager.default.subpathsOfDirectory(atPath: daemon.home + "/versions").filter { !$0.hasPrefix(".chunks") }
            #expect(whole.isEmpty, "\(whole)")
        }
    }

    /// alice is send-only towards bob: bob's edits (and the conflict copy his concurrent edit
    /// becomes) never land on alice, who lists them; alice's edits reach bob, winning the
    /// conflict there; `override` makes bob's folder alice's again.
    @Test func sendOnlyHoldsInBothDirectionsWithAConflict() throws {
        let pair = try Pair(files: ["a.txt": "a1", "b.txt": "b1"], shareArguments: ["--role", "send-only"])
        defer { pair.stop() }
        let (alice, here, there) = (pair.alice, pair.aliceFolder, pair.bobFolder)

        // bob's edit: listed on alice as not applied, and not applied.
        try pair.write(there, "b.txt", "bob's b", mtime: 1_700_000_000_000_000_000)
        try FolderSyncTests.eventually("alice lists bob's edit") { (try? pair.changes(alice, here))?["b.txt"] == "not-applied" }
        #expect(pair.text(here, "b.txt") == "b1")

        // alice's edits go out; her newer edit of b.txt wins the conflict on bob, whose own
        // edit becomes a conflict copy there — a new file of bob's, which alice does not take.
        try pair.write(here, "a.txt", "alice's a")
        try pair.write(here, "b.txt", "alice's b")
        try FolderSyncTests.eventually("alice's edits on bob, bob's edit kept as a copy", timeout: 45) {
            pair.text(there, "a.txt") == "alice's a" && pair.text(there, "b.txt") == "alice's b"
                && pair.names(there).contains { $0.contains(".sync-conflict-") }
        }
        let copy = try #require(pair.names(there).first { $0.contains(".sync-conflict-") })
        #expect(pair.text(there, copy) == "bob's b")
        try FolderSyncTests.eventually("alice lists bob's conflict copy") { (try? pair.changes(alice, here))?[copy] == "not-applied" }
        #expect(pair.names(here) == ["a.txt", "b.txt"])
        #expect(pair.text(here, "b.txt") == "alice's b")

        // The status shows the role.
        let status = try pair.env.cli(alice, ["status"])
        #expect(status.stdout.contains("send-only"), "\(status.stdout)")

        // override: bob's folder becomes alice's (his copy goes; the edit he makes now is undone).
        try pair.write(there, "a.txt", "bob's a")
        try FolderSyncTests.eventually("alice lists bob's new edit") { (try? pair.changes(alice, here))?["a.txt"] == "not-applied" }
        let overridden = try pair.env.cli(alice, ["override", here, "--json"])
        try #require(overridden.status == 0, "\(overridden.stderr)")
        try FolderSyncTests.eventually("bob's folder is alice's again", timeout: 45) {
            pair.names(there) == ["a.txt", "b.txt"] && pair.text(there, "a.txt") == "alice's a" && pair.text(there, "b.txt") == "alice's b"
        }
        #expect(try pair.changes(alice, here).isEmpty)
        #expect(pair.text(here, "a.txt") == "alice's a")
    }

    /// bob is receive-only and keeps deletions off towards alice: alice's edits land, her
    /// deletion does not (listed), and bob's own edit stays on bob (listed as locally changed).
    @Test func receiveOnlyAndNoDeletesHoldOnTheReceiver() throws {
        let pair = try Pair(files: ["a.txt": "a1", "d.txt": "d1", "e.txt": "e1"])
        defer { pair.stop() }
        let (alice, bob, here, there) = (pair.alice, pair.bob, pair.aliceFolder, pair.bobFolder)
        let set = try pair.env.cli(bob, ["role", there, "alice", "receive-only", "--no-deletes", "--json"])
        try #require(set.status == 0, "\(set.stderr)")
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(set.stdout.utf8)) as? [String: Any])
        #expect(answer["role"] as? String == "receive-only" && answer["noDeletes"] as? Bool == true, "\(answer)")

        // alice deletes d.txt and edits e.txt at once: the edit lands, the deletion does not.
        try FileManager.default.removeItem(atPath: here + "/d.txt")
        try pair.write(here, "e.txt", "alice's e")
        try FolderSyncTests.eventually("alice's edit on bob") { pair.text(there, "e.txt") == "alice's e" }
        try FolderSyncTests.eventually("bob lists alice's deletion") { (try? pair.changes(bob, there))?["d.txt"] == "not-applied" }
        #expect(pair.text(there, "d.txt") == "d1")

        // bob's edit stays on bob.
        try pair.write(there, "a.txt", "bob's a")
        try FolderSyncTests.eventually("bob lists his edit") { (try? pair.changes(bob, there))?["a.txt"] == "locally-changed" }
        Thread.sleep(forTimeInterval: 3)   // what it took the edit to reach alice when roles were not kept
        #expect(pair.text(here, "a.txt") == "a1")
        #expect(pair.text(here, "d.txt") == nil)

        // revert: the cluster's a.txt comes back on bob, his edit kept in his versions store
        // first (once, as a revert), where history lists it and restore brings it back.
        let reverted = try pair.env.cli(bob, ["revert", there, "--json"])
        try #require(reverted.status == 0, "\(reverted.stderr)")
        try FolderSyncTests.eventually("alice's a.txt back on bob") { pair.text(there, "a.txt") == "a1" }
        try pair.expectKeptOnlyInTheStore(bob, there + "/a.txt", reason: "revert", text: "bob's a")
        #expect(try pair.changes(bob, there)["a.txt"] == nil)

        // Back to both: bob's next edit goes out, and so does the one he kept back before.
        try pair.write(there, "e.txt", "bob's e")
        try FolderSyncTests.eventually("bob lists his edit of e.txt") { (try? pair.changes(bob, there))?["e.txt"] == "locally-changed" }
        let both = try pair.env.cli(bob, ["role", there, "alice", "both", "--deletes"])
        try #require(both.status == 0, "\(both.stderr)")
        try FolderSyncTests.eventually("bob's edit reaches alice once he is not receive-only") { pair.text(here, "e.txt") == "bob's e" }
        #expect(pair.text(here, "a.txt") == "a1")
        _ = alice
    }

    /// A hostile member of a folder bob is send-only towards claims bob's own authorship
    /// and a version above everything bob has (an edit, a new file, a deletion): bob asks it
    /// for nothing and changes nothing, and lists the three as not applied.
    @Test func aSendOnlyFolderTakesNothingFromAPeerWhateverItClaims() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let docs = bob.env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "bob's".write(toFile: docs + "/public.txt", atomically: false, encoding: .utf8)
        try "keep me".write(toFile: docs + "/keep.txt", atomically: false, encoding: .utf8)
        let rogue = try bob.pairedRogue(name: "rogue-member")
        defer { rogue.close() }
        let shared = try bob.env.cli(bob.daemon, ["share", docs, "--with", "rogue-member", "--role", "send-only"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let offer = try rogue.take { if case .shareOffer = $0 { true } else { false } }
        guard case let .shareOffer(folderID, _) = offer else { return }
        try rogue.send(.shareAnswer(folder: folderID, accepted: true, reason: ""))
        let listed = try HostileFolderTests.collectIndex(rogue, folder: folderID, until: ["public.txt", "keep.txt"])
        let owner = try #require(listed["public.txt"]?.modifiedBy)

        // Every entry claims to be bob's own change, newer than anything bob has.
        let forged = try ForgedFile(chunks: [Array("the member's".utf8)])
        var edit = HostileFolderTests.entry("public.txt", forged, sequence: 1, device: owner)
        edit.version = [owner: 1_000_000]
        var planted = HostileFolderTests.entry("planted.txt", forged, sequence: 2, device: owner)
        planted.version = [owner: 1_000_000]
        var deletion = HostileFolderTests.entry("keep.txt", forged, sequence: 3, device: owner)
        (deletion.deleted, deletion.rootHash, deletion.manifest, deletion.size) = (true, [], [], 0)
        deletion.version = [owner: 1_000_000]
        try rogue.send(.indexUpdate(folder: folderID, full: true, entries: [edit, planted, deletion]))
        if let asked = try? rogue.take(within: 3, where: { if case .blockRequest = $0 { true } else { false } }),
           case let .blockRequest(id, _, path, _, _, _) = asked {
            Issue.record("bob asked the member for \(path)")
            try rogue.send(.blockResponse(request: id, ok: true, data: forged.content))
            Thread.sleep(forTimeInterval: 1)
        }
        #expect(try String(contentsOfFile: docs + "/public.txt", encoding: .utf8) == "bob's")
        #expect(try String(contentsOfFile: docs + "/keep.txt", encoding: .utf8) == "keep me")
        #expect(!FileManager.default.fileExists(atPath: docs + "/planted.txt"))
        let changes = try bob.env.cli(bob.daemon, ["changes", docs])
        for path in ["public.txt", "planted.txt", "keep.txt"] {
            #expect(changes.stdout.contains(path + "  remote change not applied"), "\(changes.stdout)")
        }
    }

    /// A peer's mass change: deleting exactly half of bob's 20 files goes through; one more
    /// deletion in the same burst crosses the threshold and the folder holds it with one
    /// question (status, event) until bob confirms, which keeps the file it deletes.
    @Test func theMassChangeGuardTriggersAtItsThresholdAndNotBelow() throws {
        var files: [String: String] = [:]
        for n in 0..<20 { files[String(format: "f%02d.txt", n)] = "file \(n)" }
        let pair = try Pair(files: files)
        defer { pair.stop() }
        let (bob, here, there) = (pair.bob, pair.aliceFolder, pair.bobFolder)

        for n in 0..<10 { try FileManager.default.removeItem(atPath: here + String(format: "/f%02d.txt", n)) }
        try FolderSyncTests.eventually("half of the files deleted on bob") { pair.names(there).count == 10 }
        #expect(bob.events("folder").allSatisfy { ($0["reason"] as? String)?.contains("holding") != true })

        try FileManager.default.removeItem(atPath: here + "/f10.txt")
        let held = try bob.waitFor("folder", timeout: 20) { ($0["reason"] as? String)?.contains("holding the peers' changes") == true }
        #expect((held["reason"] as? String)?.contains("11 of 20 files") == true, "\(held)")
        let status = try pair.env.cli(bob, ["status", "--json"])
        let page = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.split(separator: "\n")[0].utf8)) as? [String: Any])
        let folder = try #require((page["folders"] as? [[String: Any]])?.first)
        let mass = try #require(folder["massChange"] as? [String: Any], "\(folder)")
        #expect(mass["affected"] as? Int == 11 && mass["files"] as? Int == 20, "\(mass)")
        #expect(folder["state"] as? String == "error")
        #expect((mass["question"] as? String)?.contains("syncpeer confirm") == true, "\(mass)")
        let text = try pair.env.cli(bob, ["status"])
        #expect(text.stdout.contains("11 of 20 files") && text.stdout.contains("syncpeer confirm"), "the question, as text: \(text.stdout)")
        Thread.sleep(forTimeInterval: 1)
        #expect(pair.text(there, "f10.txt") == "file 10")

        let confirmed = try pair.env.cli(bob, ["confirm", there])
        try #require(confirmed.status == 0, "\(confirmed.stderr)")
        try FolderSyncTests.eventually("the held deletion applied") { pair.text(there, "f10.txt") == nil }
        try pair.expectKeptOnlyInTheStore(bob, there + "/f10.txt", reason: "peer-delete", text: "file 10")
    }
}
