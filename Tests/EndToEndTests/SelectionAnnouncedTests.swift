import Foundation
import Testing

/// Selective sync seen by the other members (issue 41): bob tells alice which subtrees he
/// holds, and alice's `status` counts bob's completion over them only. Before, bob's stale
/// entries for what he left out differed from alice's newer ones for ever: alice showed bob
/// below 100 % once anything outside his selection changed.
@Suite(.serialized)
struct SelectionAnnouncedTests {
    typealias Sync = FolderSyncTests
    typealias Selective = SelectiveSyncTests

    /// Alice's view of `peer` in her folder's status: (percent, out-of-sync files, holds).
    static func member(_ trio: Sync.Trio, _ peer: String) -> (percent: Int, outOfSync: Int, holds: [String])? {
        let peers = ((try? Sync.folderStatus(trio, trio.alice))?["peers"] as? [[String: Any]]) ?? []
        guard let entry = peers.first(where: { ($0["peer"] as? [String: Any])?["name"] as? String == peer }),
              let percent = entry["percent"] as? Int, let out = entry["outOfSyncFiles"] as? Int else { return nil }
        return (percent, out, entry["holds"] as? [String] ?? [])
    }

    /// Writes `marker` on bob and waits until alice has it: by then bob's index (and the
    /// announcement sent before it) has reached alice.
    static func bobReached(_ trio: Sync.Trio, _ marker: String) throws {
        try Selective.write(marker, trio.path("bob", marker))
        try Sync.eventually("bob's \(marker) reaches alice") { Selective.exists(trio.path("alice", marker)) }
    }

    @Test func aSelectiveMemberIsAtOneHundredPercentForWhatItHolds() throws {
        let trio = try Sync.Trio()
        defer { trio.env.cleanup() }
        for (path, text) in [("keep/a.txt", "a"), ("keep/sub/b.txt", "b"), ("other/c.txt", "c"), ("top.txt", "top")] {
            try Selective.write(text, trio.path("alice", path))
        }
        try trio.share()
        try Sync.eventually("the first sync\n\(Sync.describe(trio))") { Sync.converged(trio) && Sync.tree(trio.folders["bob"]!).count == 7 }

        // Bob holds only "keep"; alice and carol change what lies outside it.
        let bobRoot = trio.folders["bob"]!
        let narrowed = try Selective.json(try trio.env.cli(trio.bob, ["select", bobRoot, "keep", "--json"]))
        #expect(narrowed["selected"] as? [String] == ["keep"])
        try Selective.write("c2", trio.path("alice", "other/c.txt"))
        try Selective.write("top2", trio.path("alice", "top.txt"))
        try Selective.write("from carol", trio.path("carol", "other/carol.txt"))
        try Sync.eventually("the edits outside bob's selection reach carol and alice") {
            (try? String(contentsOfFile: trio.path("carol", "top.txt"), encoding: .utf8)) == "top2"
                && Selective.exists(trio.path("alice", "other/carol.txt"))
        }
        try Self.bobReached(trio, "keep/marker1")
        // Alice counts bob over "keep" only: 100 %, and says what he holds.
        try Sync.eventually("alice shows bob at 100 % of what he holds: \(String(describing: Self.member(trio, "bob")))") {
            guard let bob = Self.member(trio, "bob") else { return false }
            return bob.percent == 100 && bob.outOfSync == 0 && bob.holds == ["keep"]
        }
        #expect(!Selective.exists(trio.path("bob", "other/carol.txt")) && !Selective.exists(trio.path("bob", "top.txt")))
        try Sync.eventually("carol, who holds everything, is at 100 % too") { Self.member(trio, "carol")?.percent == 100 }
        #expect(Self.member(trio, "carol")?.holds == [])
        let text = try trio.env.cli(trio.alice, ["status"])
        #expect(text.stdout.contains("holds only keep"), "\(text.stdout)")

        // A narrower selection is announced again: keep/a.txt, now outside it, no longer counts.
        _ = try Selective.json(try trio.env.cli(trio.bob, ["select", bobRoot, "keep/sub", "--json"]))
        try Self.bobReached(trio, "keep/sub/marker2")
        try Selective.write("a2", trio.path("alice", "keep/a.txt"))
        try Sync.eventually("carol has alice's edit") { (try? String(contentsOfFile: trio.path("carol", "keep/a.txt"), encoding: .utf8)) == "a2" }
        try Self.bobReached(trio, "keep/sub/marker3")
        try Sync.eventually("alice shows bob at 100 % of keep/sub: \(String(describing: Self.member(trio, "bob")))") {
            guard let bob = Self.member(trio, "bob") else { return false }
            return bob.percent == 100 && bob.outOfSync == 0 && bob.holds == ["keep/sub"]
        }
        #expect(!Selective.exists(trio.path("bob", "keep/a.txt")), "bob fetched a file outside his selection")

        // Holding everything again, with --wait: the command says what there is to fetch and
        // follows it (one result a line) until it is all here, then alice counts all of bob.
        let widened = try trio.env.cli(trio.bob, ["select", bobRoot, "--all", "--wait", "--json"])
        try #require(widened.status == 0, "\(widened.stderr)")
        let lines = try widened.stdout.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect((lines.first?["neededFiles"] as? Int ?? 0) >= 4 && (lines.first?["neededBytes"] as? Int ?? 0) > 0, "\(widened.stdout)")
        #expect(lines.last?["neededFiles"] as? Int == 0 && lines.allSatisfy { $0["selected"] as? [String] == [] }, "\(widened.stdout)")
        for path in ["keep/a.txt", "other/c.txt", "other/carol.txt", "top.txt"] {
            #expect(Selective.exists(trio.path("bob", path)), "select --wait ended before \(path) was fetched")
        }
        try Sync.eventually("the whole folder everywhere again\n\(Sync.describe(trio))") { Sync.converged(trio) }
        try Sync.eventually("alice shows bob at 100 % of the whole folder") {
            guard let bob = Self.member(trio, "bob") else { return false }
            return bob.percent == 100 && bob.holds.isEmpty
        }
    }
}
