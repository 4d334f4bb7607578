import Foundation
import Testing

/// Issue 41, points 1 and 2: every node keeps the version it loses, and a node finds and
/// restores versions anywhere in the cluster, after its own copy is gone.
@Suite struct VersionsTests {
    static func bytes(_ path: String) -> [UInt8]? { (try? Data(contentsOf: URL(fileURLWithPath: path))).map { [UInt8]($0) } }

    /// `cli … --json` as an object: its result, the last line (progress events may come before it).
    static func json(_ env: SyncpeerRunner, _ daemon: DaemonProcess, _ arguments: [String]) throws -> [String: Any] {
        let result = try env.cli(daemon, arguments + ["--json"])
        try #require(result.status == 0, "\(arguments): \(result.stderr)")
        let last = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        return try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any], "\(result.stdout)")
    }

    /// Waits until alice's `history` asks `count` connected peers (the stopped one is gone).
    static func waitUntilAsking(_ count: Int, _ trio: FolderSyncTests.Trio, _ path: String) throws {
        try FolderSyncTests.eventually("alice asks \(count) peer(s)", timeout: 20) {
            ((try? json(trio.env, trio.alice, ["history", path]))?["peersAsked"] as? Int) == count
        }
    }

    /// An accidental `rm -r` on alice reaches bob and carol; alice's own copy is gone (her
    /// record of it is known-but-not-held); with carol away, alice finds bob's versions and
    /// restores the whole tree from them, byte for byte, and the restore syncs back out.
    @Test func anRmROnAliceIsRestoredFromBobsVersions() throws {
        let trio = try FolderSyncTests.Trio()
        defer { for d in [trio.alice, trio.bob, trio.carol] { d.stop() }; trio.env.cleanup() }
        let env = trio.env
        try FileManager.default.createDirectory(atPath: trio.path("alice", "project/sub"), withIntermediateDirectories: true)
        try "plan\n".write(toFile: trio.path("alice", "project/plan.txt"), atomically: true, encoding: .utf8)
        try TestFiles.random(trio.path("alice", "project/sub/data.bin"), size: 700_000)
        let plan = try #require(Self.bytes(trio.path("alice", "project/plan.txt")))
        let data = try #require(Self.bytes(trio.path("alice", "project/sub/data.bin")))
        try trio.share()
        for node in ["bob", "carol"] {
            try FolderSyncTests.eventually("the tree reaches \(node)", timeout: 45) { Self.bytes(trio.path(node, "project/sub/data.bin")) == data }
        }

        Thread.sleep(forTimeInterval: 1.1)   // whole seconds: after plan.txt was written, before the deletion
        let beforeDeletion = ISO8601DateFormatter().string(from: Date())
        try FileManager.default.removeItem(atPath: trio.path("alice", "project"))
        for node in ["bob", "carol"] {
            try FolderSyncTests.eventually("the deletion reaches \(node)", timeout: 45) {
                !FileManager.default.fileExists(atPath: trio.path(node, "project/sub/data.bin"))
                    && !FileManager.default.fileExists(atPath: trio.path(node, "project/plan.txt"))
            }
        }
        trio.carol.stop()
        try Self.waitUntilAsking(1, trio, trio.path("alice", "project"))

        let history = try Self.json(env, trio.alice, ["history", trio.path("alice", "project")])
        let versions = history["versions"] as? [[String: Any]] ?? []
        let fromBob = versions.filter { $0["deviceName"] as? String == "bob" }
        #expect(Set(fromBob.compactMap { $0["path"] as? String }) == ["project/plan.txt", "project/sub/data.bin"], "\(versions)")
        #expect(fromBob.allSatisfy { $0["held"] as? Bool == true && $0["reason"] as? String == "peer-delete" }, "\(fromBob)")
        #expect(fromBob.first { $0["path"] as? String == "project/sub/data.bin" }?["size"] as? Int == 700_000)
        // Alice's own record of what she deleted: listed, its content not held here.
        let own = versions.filter { $0["local"] as? Bool == true }
        #expect(!own.isEmpty && own.allSatisfy { $0["held"] as? Bool == false && $0["reason"] as? String == "local-delete" }, "\(own)")
        #expect(history["peersAsked"] as? Int == 1 && history["peersAnswered"] as? Int == 1, "\(history)")

        // Nothing was kept before the tree existed: a time before it finds nothing to restore.
        let tooEarly = try env.cli(trio.alice, ["restore", trio.path("alice", "project"), "--at", "2020-01-01T00:00:00Z"])
        #expect(tooEarly.status != 0 && tooEarly.stderr.contains("no version"), "\(tooEarly.stderr)")
        let restored = try Self.json(env, trio.alice, ["restore", trio.path("alice", "project"), "--at", beforeDeletion])
        let items = restored["restored"] as? [[String: Any]] ?? []
        #expect(items.count == 2 && (restored["failed"] as? [Any])?.isEmpty == true, "\(restored)")
        #expect(items.allSatisfy { ($0["from"] as? String)?.isEmpty == false && $0["from"] as? String != "local" }, "\(items)")
        #expect(Self.bytes(trio.path("alice", "project/sub/data.bin")) == data)
        #expect(Self.bytes(trio.path("alice", "project/plan.txt")) == plan)
        // A new local change: it syncs out to bob again.
        try FolderSyncTests.eventually("the restored tree reaches bob", timeout: 45) {
            Self.bytes(trio.path("bob", "project/sub/data.bin")) == data && Self.bytes(trio.path("bob", "project/plan.txt")) == plan
        }
    }

    /// A file truncated on alice by a broken program: carol keeps what it replaced; with bob
    /// away, alice restores that version from carol by its ID, and carol gets it back too.
    @Test func aLocalTruncationOnAliceIsRestoredFromCarol() throws {
        let trio = try FolderSyncTests.Trio()
        defer { for d in [trio.alice, trio.bob, trio.carol] { d.stop() }; trio.env.cleanup() }
        let env = trio.env
        try TestFiles.random(trio.path("alice", "report.doc"), size: 400_000)
        let original = try #require(Self.bytes(trio.path("alice", "report.doc")))
        try trio.share()
        try FolderSyncTests.eventually("report.doc reaches carol", timeout: 45) { Self.bytes(trio.path("carol", "report.doc")) == original }

        try Data(original.prefix(100)).write(to: URL(fileURLWithPath: trio.path("alice", "report.doc")))
        try FolderSyncTests.eventually("the truncation reaches carol", timeout: 45) { Self.bytes(trio.path("carol", "report.doc"))?.count == 100 }
        trio.bob.stop()
        try Self.waitUntilAsking(1, trio, trio.path("alice", "report.doc"))

        let history = try Self.json(env, trio.alice, ["history", trio.path("alice", "report.doc")])
        let versions = history["versions"] as? [[String: Any]] ?? []
        let carols = try #require(versions.first { $0["deviceName"] as? String == "carol" && $0["held"] as? Bool == true }, "\(versions)")
        #expect(carols["size"] as? Int == 400_000 && carols["reason"] as? String == "peer-edit" && carols["changedByName"] as? String == "alice",
                "\(carols)")
        let id = try #require(carols["id"] as? String)
        let text = try env.cli(trio.alice, ["history", trio.path("alice", "report.doc")])
        #expect(text.stdout.contains(id) && text.stdout.contains("kept carol"), "\(text.stdout)")

        let restored = try Self.json(env, trio.alice, ["restore", trio.path("alice", "report.doc"), "--version", id])
        #expect((restored["restored"] as? [[String: Any]])?.first?["version"] as? String == id, "\(restored)")
        #expect(Self.bytes(trio.path("alice", "report.doc")) == original)
        try FolderSyncTests.eventually("carol has the restored version at the path", timeout: 45) { Self.bytes(trio.path("carol", "report.doc")) == original }
        // What the restore replaced on alice (the truncated file) is itself a version now.
        let after = try Self.json(env, trio.alice, ["history", trio.path("alice", "report.doc")])
        #expect((after["versions"] as? [[String: Any]] ?? []).contains {
            $0["local"] as? Bool == true && $0["reason"] as? String == "restore" && $0["size"] as? Int == 100 && $0["held"] as? Bool == true
        }, "\(after)")
    }
}
