import Foundation
import Testing

extension SelectionAnnouncedTests {
    /// What bob said he holds outlives a restart of alice: with bob away (stopped), alice's
    /// `status` after her restart still counts him over "keep" only (100 %, holds keep), as
    /// before it. Before, alice kept it in memory only: bob counted as holding everything, and
    /// the edits outside his selection showed him out of sync until he connected again.
    @Test func aMembersSelectionIsStillShownAfterARestartWhileItIsAway() throws {
        let trio = try Sync.Trio()
        defer { trio.env.cleanup() }
        for (path, text) in [("keep/a.txt", "a"), ("other/c.txt", "c")] {
            try Selective.write(text, trio.path("alice", path))
        }
        try trio.share()
        try Sync.eventually("the first sync\n\(Sync.describe(trio))") { Sync.converged(trio) && Sync.tree(trio.folders["bob"]!).count == 4 }
        _ = try Selective.json(try trio.env.cli(trio.bob, ["select", trio.folders["bob"]!, "keep", "--json"]))
        try Selective.write("c2", trio.path("alice", "other/c.txt"))
        try Self.bobReached(trio, "keep/marker")
        try Sync.eventually("alice shows bob at 100 % of keep: \(String(describing: Self.member(trio, "bob")))") {
            guard let bob = Self.member(trio, "bob") else { return false }
            return bob.percent == 100 && bob.outOfSync == 0 && bob.holds == ["keep"]
        }

        _ = trio.bob.stop()
        _ = trio.alice.stop()
        trio.alice = try trio.restart(trio.alice)
        try Sync.eventually("alice's folder is back") { Self.member(trio, "carol") != nil }
        let bob = Self.member(trio, "bob")
        #expect(bob?.holds == ["keep"] && bob?.percent == 100 && bob?.outOfSync == 0, "alice shows bob as \(String(describing: bob))")
    }
}
