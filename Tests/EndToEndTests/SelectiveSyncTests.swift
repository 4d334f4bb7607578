import Foundation
import Testing

/// Selective sync (`syncpeer select`, `tree`) between three real daemons: alice shares a
/// folder with bob and carol; bob holds only `keep`. Alice and carol keep syncing the rest
/// between themselves; nothing bob leaves out is fetched by him or deleted anywhere.
@Suite(.serialized)
struct SelectiveSyncTests {
    typealias Sync = FolderSyncTests

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    static func write(_ text: String, _ path: String) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    static func json(_ result: SyncpeerRunner.Result) throws -> [String: Any] {
        try #require(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
    }

    @Test func narrowingFreesWideningFetchesAndOthersKeepSyncing() throws {
        let trio = try Sync.Trio()
        defer { trio.env.cleanup() }
        for (path, text) in [("keep/a.txt", "a"), ("keep/sub/b.txt", "b"), ("other/c.txt", "c"), ("top.txt", "top"), ("other b/x.txt", "x")] {
            try Self.write(text, trio.path("alice", path))
        }
        try TestFiles.random(trio.path("alice", "other/big.bin"), size: 300_000)
        try trio.share()
        try Sync.eventually("the first sync\n\(Sync.describe(trio))") { Sync.converged(trio) && Sync.tree(trio.folders["bob"]!).count == 10 }

        // Narrowing on bob frees what alice and carol hold, and tells nobody to delete it.
        let bobRoot = trio.folders["bob"]!
        let narrowed = try Self.json(try trio.env.cli(trio.bob, ["select", bobRoot, "keep", "--json"]))
        #expect(narrowed["selected"] as? [String] == ["keep"])
        #expect(narrowed["freedFiles"] as? Int == 4, "\(narrowed)")
        #expect(narrowed["freedBytes"] as? Int == 300_000 + 1 + 3 + 1, "\(narrowed)")
        // "other b" sorts between "other" and "other/c.txt": both folders go all the same.
        #expect(!Self.exists(trio.path("bob", "other")) && !Self.exists(trio.path("bob", "top.txt")) && !Self.exists(trio.path("bob", "other b")))
        #expect(Self.exists(trio.path("bob", "keep/sub/b.txt")))

        // Alice changes inside and outside bob's selection; carol changes outside it; bob makes
        // a file of his own outside it. A marker from bob then reaches alice and carol: by
        // then any deletion bob had sent would have arrived too.
        try Self.write("a2", trio.path("alice", "keep/a.txt"))
        try Self.write("c2", trio.path("alice", "other/c.txt"))
        try Self.write("new", trio.path("alice", "other/new.txt"))
        try Self.write("from carol", trio.path("carol", "other/carol.txt"))
        try Self.write("bob's own", trio.path("bob", "other/bob-only.txt"))
        try Sync.eventually("alice's edit in the selection reaches bob") {
            (try? String(contentsOfFile: trio.path("bob", "keep/a.txt"), encoding: .utf8)) == "a2"
        }
        try Sync.eventually("carol's file outside the selection reaches alice") { Self.exists(trio.path("alice", "other/carol.txt")) }
        try Sync.eventually("alice's files outside the selection reach carol") {
            (try? String(contentsOfFile: trio.path("carol", "other/c.txt"), encoding: .utf8)) == "c2" && Self.exists(trio.path("carol", "other/new.txt"))
        }
        try Self.write("marker", trio.path("bob", "keep/marker"))
        try Sync.eventually("bob's marker everywhere") { Self.exists(trio.path("alice", "keep/marker")) && Self.exists(trio.path("carol", "keep/marker")) }
        for node in ["alice", "carol"] {
            for path in ["other/big.bin", "other/c.txt", "top.txt"] { #expect(Self.exists(trio.path(node, path)), "\(node) lost \(path)") }
            #expect(!Self.exists(trio.path(node, "other/bob-only.txt")), "bob's file outside his selection left bob")
        }
        for path in ["other/c.txt", "other/new.txt", "other/carol.txt", "other/big.bin", "top.txt"] {
            #expect(!Self.exists(trio.path("bob", path)), "bob fetched \(path) outside his selection")
        }
        #expect(Self.exists(trio.path("bob", "other/bob-only.txt")), "bob's own file outside the selection was removed")
        // Bob's status counts nothing he left out as missing.
        try Sync.eventually("bob in sync with alice for what he holds") {
            let peers = ((try? Sync.folderStatus(trio, trio.bob))?["peers"] as? [[String: Any]]) ?? []
            return peers.count == 1 && peers[0]["outOfSyncFiles"] as? Int == 0 && peers[0]["percent"] as? Int == 100
        }

        // The cluster's tree, as bob sees it: what there is, what he holds.
        var tree = try trio.env.cli(trio.bob, ["tree", bobRoot, "--json"])
        try Sync.eventually("alice's index with carol's file reaches bob") {
            tree = (try? trio.env.cli(trio.bob, ["tree", bobRoot, "other", "--json"])) ?? tree
            return tree.stdout.contains("\"name\":\"carol.txt\"")
        }
        tree = try trio.env.cli(trio.bob, ["tree", bobRoot, "--json"])
        try #require(tree.status == 0, "\(tree.stderr)")
        let items = try tree.stdout.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        let byName = Dictionary(uniqueKeysWithValues: items.map { ($0["name"] as? String ?? "?", $0) })
        #expect(items.map { $0["name"] as? String } == ["keep", "other", "other b", "top.txt"], "\(tree.stdout)")
        #expect(byName["keep"]?["selected"] as? String == "all" && byName["other"]?["selected"] as? String == "none")
        #expect(byName["other"]?["files"] as? Int == 4 && byName["other"]?["localFiles"] as? Int == 0, "\(tree.stdout)")
        #expect(byName["keep"]?["localFiles"] as? Int == 3 && byName["top.txt"]?["directory"] as? Bool == false, "\(tree.stdout)")

        // Widening fetches everything, and bob's own file goes out as any new file.
        let widened = try Self.json(try trio.env.cli(trio.bob, ["select", bobRoot, "--all", "--json"]))
        #expect(widened["selected"] as? [String] == [])
        try Sync.eventually("the whole folder everywhere again\n\(Sync.describe(trio))") {
            Sync.converged(trio) && Self.exists(trio.path("bob", "other/carol.txt")) && Self.exists(trio.path("alice", "other/bob-only.txt"))
        }
        #expect(try String(contentsOfFile: trio.path("bob", "other/c.txt"), encoding: .utf8) == "c2")
        #expect(try TestFiles.hash(trio.path("bob", "other/big.bin")) == TestFiles.hash(trio.path("alice", "other/big.bin")))
    }

    /// `share --only` holds only the subtree from the first scan on: the rest stays local.
    @Test func shareOnlyNeverSendsTheRest() throws {
        let trio = try Sync.Trio()
        defer { trio.env.cleanup() }
        try Self.write("in", trio.path("alice", "docs/in.txt"))
        try Self.write("out", trio.path("alice", "private/out.txt"))
        let result = try trio.env.cli(trio.alice, ["share", trio.folders["alice"]!, "--with", "bob", "--only", "docs"])
        try #require(result.status == 0, "\(result.stderr)")
        try Sync.eventually("docs reaches bob") { Self.exists(trio.path("bob", "docs/in.txt")) }
        try Self.write("later", trio.path("alice", "docs/later.txt"))
        try Sync.eventually("a later file in docs reaches bob") { Self.exists(trio.path("bob", "docs/later.txt")) }
        #expect(!Self.exists(trio.path("bob", "private")), "a path outside --only left alice")
        let bad = try trio.env.cli(trio.bob, ["select", trio.folders["bob"]!, "../etc"])
        #expect(bad.status != 0 && bad.stderr.contains(".."), "\(bad.stderr)")
    }

    /// `accept FOLDER --only` holds only the subtree from the first pull on; `select --all`
    /// then fetches the rest.
    @Test func acceptOnlyFetchesOnlyTheSubtree() throws {
        let trio = try Sync.Trio()
        defer { trio.env.cleanup() }
        // Dave asks before he joins a folder (no --auto-accept).
        let dave = try DaemonProcess(trio.env, name: "dave", arguments: [], environment: Sync.environment)
        _ = try trio.env.pair(dave, trio.alice, autoAccepted: true)
        try trio.alice.waitForState("connected", peer: "dave")
        try Self.write("in", trio.path("alice", "docs/in.txt"))
        try Self.write("out", trio.path("alice", "private/out.txt"))
        let shared = try Self.json(try trio.env.cli(trio.alice, ["share", trio.folders["alice"]!, "--with", "dave", "--json"]))
        let folderID = try #require(shared["folder"] as? String)
        _ = try dave.waitFor("share_offer") { $0["folder"] as? String == folderID }
        let copy = trio.env.home("dave-docs")
        let accepted = try trio.env.cli(dave, ["accept", folderID, "--into", copy, "--only", "docs"])
        try #require(accepted.status == 0, "\(accepted.stderr)")
        try Sync.eventually("docs reaches dave") { Self.exists(copy + "/docs/in.txt") }
        try Self.write("later", trio.path("alice", "docs/later.txt"))
        try Sync.eventually("a later file in docs reaches dave") { Self.exists(copy + "/docs/later.txt") }
        #expect(!Self.exists(copy + "/private"), "dave fetched a path outside --only")
        let widened = try trio.env.cli(dave, ["select", copy, "--all"])
        try #require(widened.status == 0, "\(widened.stderr)")
        try Sync.eventually("the rest reaches dave once he holds everything") { Self.exists(copy + "/private/out.txt") }
    }

    /// A deselected file no peer holds (bob wrote it while alone) stays on bob's disk:
    /// narrowing never loses the only copy.
    @Test func narrowingKeepsWhatOnlyThisDeviceHolds() throws {
        let trio = try Sync.Trio()
        defer { trio.env.cleanup() }
        try Self.write("shared", trio.path("alice", "other/shared.txt"))
        try Self.write("k", trio.path("alice", "keep/k.txt"))
        try trio.share()
        try Sync.eventually("the first sync") { Self.exists(trio.path("bob", "other/shared.txt")) && Self.exists(trio.path("bob", "keep/k.txt")) }
        let before = try Sync.folderStatus(trio, trio.bob)["files"] as? Int ?? 0
        _ = trio.alice.stop()
        try Self.write("only bob has this", trio.path("bob", "other/own.txt"))
        try Sync.eventually("bob records his file") { ((try? Sync.folderStatus(trio, trio.bob))?["files"] as? Int ?? 0) > before }
        let narrowed = try Self.json(try trio.env.cli(trio.bob, ["select", trio.folders["bob"]!, "keep", "--json"]))
        #expect(narrowed["freedFiles"] as? Int == 1 && narrowed["keptFiles"] as? Int == 1, "\(narrowed)")
        #expect(!Self.exists(trio.path("bob", "other/shared.txt")))
        #expect((try? String(contentsOfFile: trio.path("bob", "other/own.txt"), encoding: .utf8)) == "only bob has this")
    }
}
