import Foundation
import Testing

/// Issue 41, "selective sync never fetches or deletes outside the selection", at the
/// selection's edge: alice (who holds everything) moves files and a directory across bob's
/// selection both ways and deletes outside it. Bob drops what left his selection and fetches
/// what entered it, and nothing else: he fetches nothing outside it, and nothing he leaves
/// out, nor his own file outside it, is deleted anywhere.
@Suite(.serialized)
struct SelectiveSyncBoundaryTests {
    typealias Sync = FolderSyncTests
    typealias Selective = SelectiveSyncTests

    static func text(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    @Test func movesAcrossTheSelectionFetchAndDropOnlyWhatIsInside() throws {
        let trio = try Sync.Trio()
        defer { trio.env.cleanup() }
        for (path, text) in [("keep/a.txt", "a"), ("keep/dir/d1.txt", "d1"), ("keep/dir/d2.txt", "d2"), ("other/c.txt", "c"),
                             ("other/gone.txt", "gone"), ("other/sub/e.txt", "e")] {
            try Selective.write(text, trio.path("alice", path))
        }
        try trio.share()
        try Sync.eventually("the first sync\n\(Sync.describe(trio))") { Sync.converged(trio) && Sync.tree(trio.folders["bob"]!).count == 10 }
        _ = try Selective.json(try trio.env.cli(trio.bob, ["select", trio.folders["bob"]!, "keep", "--json"]))
        try Sync.eventually("bob frees what he left out") { !Selective.exists(trio.path("bob", "other")) }
        try Selective.write("bob's own", trio.path("bob", "other/bob-only.txt"))

        // Out of bob's selection: a file and a directory. Into it: a file. Outside it: a
        // deletion and a directory deleted whole.
        let alice = trio.folders["alice"]!
        try FileManager.default.moveItem(atPath: alice + "/keep/a.txt", toPath: alice + "/other/a.txt")
        try FileManager.default.moveItem(atPath: alice + "/keep/dir", toPath: alice + "/other/dir")
        try FileManager.default.moveItem(atPath: alice + "/other/c.txt", toPath: alice + "/keep/c.txt")
        try FileManager.default.removeItem(atPath: alice + "/other/gone.txt")
        try FileManager.default.removeItem(atPath: alice + "/other/sub")

        try Sync.eventually("what left bob's selection leaves bob, what entered it arrives\n\(Sync.describe(trio))", timeout: 60) {
            !Selective.exists(trio.path("bob", "keep/a.txt")) && !Selective.exists(trio.path("bob", "keep/dir"))
                && Self.text(trio.path("bob", "keep/c.txt")) == "c"
        }
        try Sync.eventually("carol has alice's moves\n\(Sync.describe(trio))", timeout: 60) {
            Self.text(trio.path("carol", "other/dir/d2.txt")) == "d2" && Self.text(trio.path("carol", "keep/c.txt")) == "c"
                && !Selective.exists(trio.path("carol", "other/sub"))
        }
        // A marker from bob reaches both: any deletion bob had sent would have arrived too.
        try Selective.write("marker", trio.path("bob", "keep/marker"))
        try Sync.eventually("bob's marker everywhere") {
            Selective.exists(trio.path("alice", "keep/marker")) && Selective.exists(trio.path("carol", "keep/marker"))
        }
        for node in ["alice", "carol"] {
            #expect(Self.text(trio.path(node, "other/a.txt")) == "a", "\(node) lost the file moved out of bob's selection")
            #expect(Self.text(trio.path(node, "other/dir/d1.txt")) == "d1", "\(node) lost the directory moved out of bob's selection")
            #expect(!Selective.exists(trio.path(node, "other/bob-only.txt")), "bob's file outside his selection left bob")
        }
        for path in ["other/a.txt", "other/dir", "other/c.txt", "other/gone.txt"] {
            #expect(!Selective.exists(trio.path("bob", path)), "bob fetched \(path) outside his selection")
        }
        #expect(Self.text(trio.path("bob", "other/bob-only.txt")) == "bob's own", "bob's own file outside his selection was removed")
        let bobTree = Sync.tree(trio.folders["bob"]!).keys.sorted()
        #expect(bobTree == ["keep", "keep/c.txt", "keep/marker", "other", "other/bob-only.txt"], "\(bobTree)")
    }
}
