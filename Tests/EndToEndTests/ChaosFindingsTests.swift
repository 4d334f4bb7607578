import Foundation
import Glibc
import Testing

/// Product bugs the chaos test found, reduced to one deterministic case each (each fails on
/// main). A test is disabled while its bug is open; enable it with the fix.
@Suite(.serialized)
struct ChaosFindingsTests {
    /// The tests that act during a pull of a large file run without growing files: fetched
    /// ahead while alice hashes it, most of the file would be there before bob's pull began,
    /// and the pull too short to act during it.
    static let withoutGrowingFiles = FolderSyncTests.environment.merging(["SYNCPEER_GROWING_FROM": String(UInt64.max)]) { $1 }

    /// Bob edits a file while his daemon fetches alice's newer version of it: his edit must
    /// survive (the file, or a conflict copy), never be replaced by the fetched content. (Chaos
    /// seed 1001: the edit was checked against the index when the pull was planned, not when
    /// the fetched file was renamed into place seconds later.)
    @Test func anEditMadeWhileThePeersVersionIsFetchedIsKept() throws {
        let trio = try FolderSyncTests.Trio(environment: Self.withoutGrowingFiles)
        defer { trio.env.cleanup() }
        try "small".write(toFile: trio.path("alice", "big.bin"), atomically: true, encoding: .utf8)
        try trio.share()
        try FolderSyncTests.eventually("first sync") { FolderSyncTests.converged(trio) && FolderSyncTests.tree(trio.folders["bob"]!).count == 1 }
        try TestFiles.random(trio.path("alice", "big.bin"), size: 150_000_000, mtime: nil)
        try FolderSyncTests.eventually("bob fetches alice's new version", timeout: 60) {
            let transfers = ((try? FolderSyncTests.folderStatus(trio, trio.bob))?["transfers"] as? [[String: Any]]) ?? []
            return transfers.contains { ($0["path"] as? String) == "big.bin" }
        }
        try "bob's edit during the fetch".write(toFile: trio.path("bob", "big.bin"), atomically: true, encoding: .utf8)
        let transfers = try FolderSyncTests.folderStatus(trio, trio.bob)["transfers"] as? [[String: Any]] ?? []
        try #require(transfers.contains { ($0["path"] as? String) == "big.bin" }, "the fetch ended before the edit: use a larger file")
        try FolderSyncTests.eventually("the same files everywhere\n\(FolderSyncTests.describe(trio))", timeout: 90) {
            FolderSyncTests.converged(trio) && FolderSyncTests.tree(trio.folders["bob"]!).count == 2
        }
        let contents = try FileManager.default.contentsOfDirectory(atPath: trio.folders["carol"]!).map {
            try Data(contentsOf: URL(fileURLWithPath: trio.path("carol", $0)))
        }
        #expect(contents.contains(Data("bob's edit during the fetch".utf8)), "bob's edit is the file or its conflict copy")
        #expect(contents.contains { $0.count == 150_000_000 }, "alice's version is the file or its conflict copy")
    }

    /// Bob moves a directory out of the folder while his daemon fetches a new file of alice's
    /// into it: alice's file must survive everywhere (the move deleted only what bob had seen).
    /// (The applier put a fetched file in through the directory handle opened when the pull
    /// began, wherever the directory had gone, and recorded it at its old path; the scan of the
    /// move would then record a deletion dominating alice's version. A candidate, read from
    /// the code, for chaos seed 1004's lost versions. Unlike the other tests here this one has
    /// not been seen to fail without the fix: the daemon is paused for the move, yet the old
    /// binary passed it once, timed out once and finished the fetch before the move once.)
    @Test func aFileFetchedIntoADirectoryMovedAwayMeanwhileIsKept() throws {
        let trio = try FolderSyncTests.Trio(environment: Self.withoutGrowingFiles)
        defer { trio.env.cleanup() }
        try FileManager.default.createDirectory(atPath: trio.path("alice", "sub"), withIntermediateDirectories: true)
        try "seen by bob".write(toFile: trio.path("alice", "sub/note.txt"), atomically: true, encoding: .utf8)
        try trio.share()
        try FolderSyncTests.eventually("first sync") {
            FolderSyncTests.converged(trio) && FileManager.default.fileExists(atPath: trio.path("bob", "sub/note.txt"))
        }
        try TestFiles.random(trio.path("alice", "sub/big.bin"), size: 150_000_000, mtime: nil)
        let big = try TestFiles.hash(trio.path("alice", "sub/big.bin"))
        func fetching() -> Bool {
            let transfers = ((try? FolderSyncTests.folderStatus(trio, trio.bob))?["transfers"] as? [[String: Any]]) ?? []
            return transfers.contains { ($0["path"] as? String) == "sub/big.bin" }
        }
        try FolderSyncTests.eventually("bob fetches alice's new file", timeout: 120, fetching)
        // The move happens while bob's daemon is paused in the middle of the fetch.
        Glibc.kill(trio.bob.pid, SIGSTOP)
        let moved = Result { try FileManager.default.moveItem(atPath: trio.path("bob", "sub"), toPath: trio.env.home("bob-moved-away")) }
        Glibc.kill(trio.bob.pid, SIGCONT)
        try moved.get()
        let deadline = Date().addingTimeInterval(180)
        var everywhere = false
        while !everywhere && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.5)
            everywhere = FolderSyncTests.converged(trio) && trio.all.allSatisfy { (try? TestFiles.hash(trio.path($0, "sub/big.bin"))) == big }
        }
        try #require(everywhere, "alice's file everywhere; now:\n\(FolderSyncTests.describe(trio))\nbob's status: \((try? FolderSyncTests.folderStatus(trio, trio.bob)) ?? [:])")
        #expect(!FileManager.default.fileExists(atPath: trio.path("alice", "sub/note.txt")), "bob's move deleted what he had")
    }

    /// Carol moves a directory away while bob, offline, edits a file in it. Delete-vs-modify:
    /// the edit wins, so `sub/f.txt` with bob's edit must be back everywhere, beside carol's
    /// moved copy. (Chaos seed 3: alice and bob stayed at 60 %, idle, no error, for ever:
    /// alice took `sub/f.txt`, whose parent she had deleted, for a path changed on disk and
    /// never pulled it; bob's deletion of `sub` failed on the kept file without a word, so his
    /// `sub` stayed dominated by the deletion. Now the directory is recorded live again.)
    @Test func anEditConcurrentWithARenameOfItsDirectoryReachesEveryone() throws {
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
        // And every node says so: in sync with each peer, nothing failing.
        try FolderSyncTests.eventually("every node 100 % in sync") {
            [trio.alice, trio.bob, trio.carol].allSatisfy { daemon in
                guard let status = try? FolderSyncTests.folderStatus(trio, daemon) else { return false }
                let peers = status["peers"] as? [[String: Any]] ?? []
                return status["state"] as? String == "idle" && (status["failing"] as? Int) == 0
                    && !peers.isEmpty && peers.allSatisfy { ($0["percent"] as? Int) == 100 }
            }
        }
    }
}
