import Foundation
import Testing

/// Product bugs the chaos test found, reduced to one deterministic case each. Disabled while
/// the bug is open (each fails on main); enable one with its fix.
@Suite(.serialized)
struct ChaosFindingsTests {
    /// Carol moves a directory away while bob, offline, edits a file in it. Delete-vs-modify:
    /// the edit wins, so `sub/f.txt` with bob's edit must be back everywhere, beside carol's
    /// moved copy. (Chaos seed 3: alice and bob stay at 60 %, idle, no error, for ever; bob
    /// never gets `d2/sub/f.txt` and nobody gets bob's edit.)
    @Test(.disabled("open bug found by the chaos test: an edit concurrent with a rename of its directory never syncs"))
    func anEditConcurrentWithARenameOfItsDirectoryReachesEveryone() throws {
        let trio = try FolderSyncTests.Trio()
        defer { trio.env.cleanup() }
        try FileManager.default.createDirectory(atPath: trio.path("alice", "sub"), withIntermediateDirectories: true)
        try "v1".write(toFile: trio.path("alice", "sub/f.txt"), atomically: true, encoding: .utf8)
        try trio.share()
        try FolderSyncTests.eventually("first sync") {
            FolderSyncTests.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "sub/f.txt"))
        }
        trio.bob.stop()
        try FileManager.default.createDirectory(atPath: trio.path("carol", "d2"), withIntermediateDirectories: true)
        try FolderSyncTests.eventually("d2 on alice") { FileManager.default.fileExists(atPath: trio.path("alice", "d2")) }
        try FileManager.default.moveItem(atPath: trio.path("carol", "sub"), toPath: trio.path("carol", "d2/sub"))
        try FolderSyncTests.eventually("alice has the move") {
            FileManager.default.fileExists(atPath: trio.path("alice", "d2/sub/f.txt"))
                && !FileManager.default.fileExists(atPath: trio.path("alice", "sub"))
        }
        try "v2 by bob".write(toFile: trio.path("bob", "sub/f.txt"), atomically: true, encoding: .utf8)
        trio.bob = try trio.restart(trio.bob)
        try FolderSyncTests.eventually("bob's edit and carol's move everywhere\n\(FolderSyncTests.describe(trio))", timeout: 30) {
            FolderSyncTests.converged(trio) && trio.all.allSatisfy { node in
                (try? String(contentsOfFile: trio.path(node, "sub/f.txt"), encoding: .utf8)) == "v2 by bob"
                    && FileManager.default.fileExists(atPath: trio.path(node, "d2/sub/f.txt"))
            }
        }
    }
}
