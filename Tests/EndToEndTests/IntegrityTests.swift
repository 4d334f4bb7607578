import Foundation
import Glibc
import PeerFiles
import Testing

/// Bytes that rotted on a node's disk under an unchanged size, mtime and inode (bit rot, a
/// program that wrote in place and restored the mtime): they are never taken into a version
/// a peer made, and `syncpeer verify` finds and repairs them. Three real daemons on loopback.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct IntegrityTests {
    typealias Trio = FolderSyncTests.Trio

    /// Flips one byte at `offset` of `path` in place and puts the mtime back: to the
    /// scanner the file is unchanged.
    static func rot(_ path: String, at offset: Int) throws {
        var st = stat()
        try #require(stat(path, &st) == 0)
        let fd = open(path, O_RDWR)
        try #require(fd >= 0)
        var byte: UInt8 = 0
        try #require(pread(fd, &byte, 1, off_t(offset)) == 1)
        byte ^= 0x40
        try #require(pwrite(fd, &byte, 1, off_t(offset)) == 1)
        var times = [st.st_atim, st.st_mtim]
        try #require(futimens(fd, &times) == 0)
        close(fd)
        var after = stat()
        try #require(stat(path, &after) == 0 && after.st_mtim.tv_nsec == st.st_mtim.tv_nsec && after.st_size == st.st_size)
    }

    /// Bob's copy rots in one chunk; alice then edits another chunk. Bob builds alice's new
    /// version from his own copy, but the rotten chunk is not one he may reuse: it is
    /// fetched, and bob (and carol, who may pull from bob) end with alice's bytes exactly.
    /// Before, the range was copied unread because the stamp matched, and bob recorded the
    /// corruption as alice's version.
    @Test func aRottenLocalChunkIsNeverReusedInAPeersVersion() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        let size = 12 << 20
        let file = trio.path("alice", "big.bin")
        try TestFiles.random(file, size: size)
        try trio.share()
        let first = try TestFiles.hash(file)
        try FolderSyncTests.eventually("the first sync\n\(FolderSyncTests.describe(trio))", timeout: 60) {
            ["bob", "carol"].allSatisfy { (try? TestFiles.hash(trio.path($0, "big.bin"))) == first }
        }
        try Self.rot(trio.path("bob", "big.bin"), at: 9 << 20)
        Thread.sleep(forTimeInterval: 0.5)   // bob's watcher sees the write, and trusts the stamp

        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
        try handle.seek(toOffset: 1 << 20)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 64 << 10))
        try handle.close()
        let edited = try TestFiles.hash(file)
        do {
            try FolderSyncTests.eventually("alice's edit arrives intact", timeout: 30) {
                ["bob", "carol"].allSatisfy { (try? TestFiles.hash(trio.path($0, "big.bin"))) == edited }
            }
        } catch {
            let bob = try TestFiles.hash(trio.path("bob", "big.bin"))
            Issue.record("bob has \(bob == edited ? "alice's version" : "a corrupt version") after the edit\n\(FolderSyncTests.describe(trio))")
            throw error
        }
    }
}

extension IntegrityTests {
    /// A peer renames a file whose copy on bob rotted under an unchanged stamp: bob does not
    /// move his rotten file to the new name as the peer's version (a rename moves no data,
    /// but its bytes are hashed first); he builds it from verified chunks, and has alice's
    /// bytes at the new path.
    @Test func aRenameNeverMovesARottenFileIntoAPeersVersion() throws {
        // No periodic rescan: the rename is seen by alice's watcher and reaches bob as one
        // (a full scan in between would send a deletion and a new file: then bob builds it
        // from verified chunks anyway, and the test would not test the rename).
        var environment = FolderSyncTests.environment
        environment["SYNCPEER_RESCAN_MS"] = "600000"
        let trio = try Trio(environment: environment)
        defer { trio.env.cleanup() }
        try TestFiles.random(trio.path("alice", "photo.bin"), size: 3 << 20)
        try FileManager.default.createDirectory(atPath: trio.path("alice", "2024"), withIntermediateDirectories: true)
        try trio.share()
        let content = try TestFiles.hash(trio.path("alice", "photo.bin"))
        try FolderSyncTests.eventually("the first sync\n\(FolderSyncTests.describe(trio))", timeout: 60) {
            ["bob", "carol"].allSatisfy { (try? TestFiles.hash(trio.path($0, "photo.bin"))) == content }
                && FileManager.default.fileExists(atPath: trio.path("bob", "2024"))
        }
        try Self.rot(trio.path("bob", "photo.bin"), at: 2 << 20)
        Thread.sleep(forTimeInterval: 0.5)
        #expect(rename(trio.path("alice", "photo.bin"), trio.path("alice", "2024/photo.bin")) == 0)
        try FolderSyncTests.eventually("the rename reaches bob\n\(FolderSyncTests.describe(trio))", timeout: 30) {
            FileManager.default.fileExists(atPath: trio.path("bob", "2024/photo.bin"))
                && !FileManager.default.fileExists(atPath: trio.path("bob", "photo.bin"))
        }
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try TestFiles.hash(trio.path("bob", "2024/photo.bin")) == content, "bob moved his rotten copy into alice's version")
    }

    /// `syncpeer verify` on bob, whose copy rotted in two files under unchanged stamps:
    /// both are found and rebuilt from a peer (bob's files are alice's again, byte for byte),
    /// a second run finds nothing; with every peer gone, a new rot is found and reported as
    /// not repaired (exit status 1), and the file is left as it was.
    @Test func verifyFindsRottenFilesAndRepairsThemFromAPeer() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        try TestFiles.random(trio.path("alice", "big.bin"), size: 10 << 20)
        for i in 0..<20 { try TestFiles.random(trio.path("alice", "small-\(i).bin"), size: 3_000 + i) }
        try trio.share()
        try FolderSyncTests.eventually("the first sync\n\(FolderSyncTests.describe(trio))", timeout: 60) {
            FolderSyncTests.converged(trio) && FileManager.default.fileExists(atPath: trio.path("bob", "small-19.bin"))
        }
        try Self.rot(trio.path("bob", "big.bin"), at: 7 << 20)
        try Self.rot(trio.path("bob", "small-3.bin"), at: 100)
        let found = try TestFiles.hash(trio.path("bob", "small-3.bin"))
        #expect(try TestFiles.hash(trio.path("bob", "big.bin")) != TestFiles.hash(trio.path("alice", "big.bin")))

        func verify() throws -> (status: Int32, result: [String: Any]) {
            let run = try trio.env.cli(trio.bob, ["verify", trio.folders["bob"]!, "--json"])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stderr)")
            return (run.status, object)
        }
        let first = try verify()
        #expect(first.status == 0, "\(first.result)")
        #expect(first.result["files"] as? Int == 21 && first.result["corrupt"] as? Int == 2 && first.result["repaired"] as? Int == 2,
                "\(first.result)")
        let damaged = (first.result["damaged"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        #expect(Set(damaged) == ["big.bin", "small-3.bin"], "\(first.result)")
        for name in ["big.bin", "small-3.bin"] {
            #expect(try TestFiles.hash(trio.path("bob", name)) == TestFiles.hash(trio.path("alice", name)), "\(name) repaired")
        }
        // What was replaced is kept in bob's versions store (damage and an edit in place that
        // kept the size and mtime look the same), never only overwritten: restored beside it.
        let kept = try #require((first.result["damaged"] as? [[String: Any]] ?? []).first { $0["path"] as? String == "small-3.bin" }?["kept"]
            as? String, "\(first.result)")
        let restored = try trio.env.cli(trio.bob, ["restore", trio.path("bob", "small-3.bin"), "--version", kept, "--to", trio.path("bob", "found.bin")])
        try #require(restored.status == 0, "\(restored.stderr)")
        #expect(try TestFiles.hash(trio.path("bob", "found.bin")) == found)
        unlink(trio.path("bob", "found.bin"))
        let second = try verify()
        #expect(second.status == 0 && second.result["corrupt"] as? Int == 0, "\(second.result)")

        // Nobody to repair from: reported, exit 1, the file left as it is.
        #expect(trio.alice.stop() == 0 && trio.carol.stop() == 0)
        try Self.rot(trio.path("bob", "small-7.bin"), at: 10)
        let rotten = try TestFiles.hash(trio.path("bob", "small-7.bin"))
        let alone = try verify()
        #expect(alone.status == 1, "\(alone.result)")
        #expect(alone.result["corrupt"] as? Int == 1 && alone.result["repaired"] as? Int == 0, "\(alone.result)")
        let reason = ((alone.result["damaged"] as? [[String: Any]])?.first?["reason"] as? String) ?? ""
        #expect(reason.contains("no peer"), "\(alone.result)")
        #expect(try TestFiles.hash(trio.path("bob", "small-7.bin")) == rotten)
        let human = try trio.env.cli(trio.bob, ["verify", trio.folders["bob"]!])
        #expect(human.status == 1 && human.stdout.contains("DAMAGED   small-7.bin"), "\(human.stdout)")
    }
}
