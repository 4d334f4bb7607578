import Foundation
import Glibc
import Testing

/// Workload C as a user meets it, with versions on: a small edit in the middle of a large
/// file reaches bob, whose daemon keeps the version it replaced as the old inode itself
/// (a pack under HOME/versions/.packs), not as a copy under .chunks; the version restores
/// byte for byte, and a damaged pack is refused, never restored wrong.
@Suite struct VersionPackE2ETests {
    /// Bytes of the regular files under `directory` (0 when it does not exist).
    static func bytes(under directory: String) -> Int64 {
        guard let names = FileManager.default.subpaths(atPath: directory) else { return 0 }
        return names.reduce(0) { total, name in
            var st = stat()
            guard lstat(directory + "/" + name, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return total }
            return total + Int64(st.st_size)
        }
    }

    /// Bytes the process wrote (`write_bytes` of /proc/PID/io) and its CPU seconds.
    static func cost(_ pid: Int32) -> (written: Int64, cpu: Double) {
        let io = (try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)) ?? ""
        let written = io.split(separator: "\n").first { $0.hasPrefix("write_bytes:") }.flatMap { Int64($0.split(separator: " ").last ?? "") } ?? -1
        let stat = ((try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? "").split(separator: ")").last?.split(separator: " ") ?? []
        let ticks = stat.count > 12 ? (Double(stat[11]) ?? 0) + (Double(stat[12]) ?? 0) : -1
        return (written, ticks / Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// alice shares HOME/docs, holding `name` (`size` random bytes), with bob, until bob has
    /// it in HOME/bob-recv/docs: the daemons (the caller stops them) and the file's bytes.
    static func shared(_ env: SyncpeerRunner, _ name: String, size: Int) throws -> (alice: DaemonProcess, bob: DaemonProcess, original: [UInt8]) {
        for directory in ["alice-recv", "bob-recv", "docs", "out"] {
            try FileManager.default.createDirectory(atPath: env.home(directory), withIntermediateDirectories: true)
        }
        try TestFiles.random(env.home("docs") + "/" + name, size: size)
        let original = try #require(VersionsTests.bytes(env.home("docs") + "/" + name))
        let alice = try FolderSyncTests.Trio.daemon(env, "alice", environment: FolderSyncTests.environment)
        var bob: DaemonProcess?
        do {
            bob = try FolderSyncTests.Trio.daemon(env, "bob", environment: FolderSyncTests.environment)
            _ = try env.pair(alice, bob!, autoAccepted: true)
            let shared = try env.cli(alice, ["share", env.home("docs"), "--with", "bob"])
            try #require(shared.status == 0, "\(shared.stderr)")
            try FolderSyncTests.eventually("\(name) reaches bob", timeout: Double(max(60, size >> 22))) {
                VersionsTests.bytes(env.home("bob-recv") + "/docs/" + name) == original
            }
            return (alice, bob!, original)
        } catch {
            alice.stop()
            bob?.stop()
            throw error
        }
    }

    /// `VERSIONS_MEASURE_MB=1024` measures workload C's 1 GiB file (default 12 MiB): it
    /// prints bob's bytes written and CPU seconds from the edit until the version is kept.
    @Test func anEditInTheMiddleOfALargeFileIsKeptWithoutCopyingIt() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let aliceFile = env.home("docs") + "/disk.img", bobFolder = env.home("bob-recv") + "/docs"
        let size = (Int(ProcessInfo.processInfo.environment["VERSIONS_MEASURE_MB"] ?? "") ?? 12) << 20
        let (alice, bob, original) = try Self.shared(env, "disk.img", size: size)
        defer { alice.stop(); bob.stop() }

        // 256 KiB (1 MiB for 1 GiB) rewritten in place in the middle, as a VM or a video editor does.
        let before = Self.cost(bob.process.processIdentifier)
        var edited = original
        let patch = (0..<(max(256 << 10, size >> 10))).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        edited.replaceSubrange(size / 2..<size / 2 + patch.count, with: patch)
        let fd = open(aliceFile, O_WRONLY)
        _ = patch.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(size / 2)) }
        close(fd)
        try FolderSyncTests.eventually("the edit reaches bob", timeout: Double(max(60, size >> 22))) { VersionsTests.bytes(bobFolder + "/disk.img") == edited }

        // (The version is kept just after the new file is in place.)
        var kept: [String: Any] = [:]
        try FolderSyncTests.eventually("bob lists the version the edit replaced", timeout: 30) {
            let history = try? VersionsTests.json(env, bob, ["history", bobFolder + "/disk.img"])
            kept = (history?["versions"] as? [[String: Any]] ?? []).first {
                $0["local"] as? Bool == true && $0["reason"] as? String == "peer-edit"
            } ?? [:]
            return !kept.isEmpty
        }
        #expect(kept["held"] as? Bool == true && kept["size"] as? Int == size, "\(kept)")
        let after = Self.cost(bob.process.processIdentifier)
        print("version pack: bob applied a \(patch.count >> 10) KiB edit of a \(size >> 20) MiB file and kept the version: "
              + "\(after.written - before.written) bytes written, \(String(format: "%.2f", after.cpu - before.cpu)) CPU-s")
        // The store gained the old inode, not a copy of it.
        let chunks = Self.bytes(under: bob.home + "/versions/.chunks"), packs = Self.bytes(under: bob.home + "/versions/.packs")
        #expect(chunks == 0, "\(chunks) bytes copied into .chunks for a \(size)-byte file")
        #expect(packs == Int64(size), "\(packs) bytes in .packs")

        let id = try #require(kept["id"] as? String)
        let restored = try VersionsTests.json(env, bob, ["restore", bobFolder + "/disk.img", "--version", id, "--to", bobFolder + "/before.img"])
        #expect((restored["restored"] as? [[String: Any]])?.first?["from"] as? String == "local", "\(restored)")
        #expect(VersionsTests.bytes(bobFolder + "/before.img") == original)

        // One byte of the pack damaged: `verify` finds it; no one else holds the version
        // (alice's old bytes are gone), so the restore refuses, and the version is no longer
        // listed as held here.
        let pack = try #require(try FileManager.default.contentsOfDirectory(atPath: bob.home + "/versions/.packs").first)
        let packFD = open(bob.home + "/versions/.packs/" + pack, O_WRONLY)
        var flipped = original[size / 4] ^ 0x10
        pwrite(packFD, &flipped, 1, off_t(size / 4))
        close(packFD)
        // `verify` reads the kept versions back too, and says so.
        let verified = try VersionsTests.json(env, bob, ["verify", bobFolder])
        #expect(verified["versions"] as? Int == 1 && verified["versionsDamaged"] as? Int == 1, "\(verified)")
        let refused = try env.cli(bob, ["restore", bobFolder + "/disk.img", "--version", id, "--to", bobFolder + "/damaged.img"])
        #expect(refused.status != 0 || refused.stdout.contains("\"failed\":[{"), "\(refused.stdout) \(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: bobFolder + "/damaged.img"), "a damaged version was restored")
        let listed = try VersionsTests.json(env, bob, ["history", bobFolder + "/disk.img"])
        #expect((listed["versions"] as? [[String: Any]] ?? []).contains { $0["id"] as? String == id && $0["held"] as? Bool == false }, "\(listed)")
    }

    /// A peer's deletion of a large file, and a restore over a large file, keep the version
    /// that goes as its own inode too (a pack): the store's chunk files gain nothing (before,
    /// both copied the whole file into .chunks), each version restores byte for byte, and
    /// `verify` finds every kept version whole.
    @Test func aDeletionAndARestoreOverAFileKeepTheOldInodeNotACopy() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let aliceFile = env.home("docs") + "/movie.mov", bobFolder = env.home("bob-recv") + "/docs"
        let size = 8 << 20
        let (alice, bob, original) = try Self.shared(env, "movie.mov", size: size)
        defer { alice.stop(); bob.stop() }
        let chunks = { Self.bytes(under: bob.home + "/versions/.chunks") }, packs = { Self.bytes(under: bob.home + "/versions/.packs") }

        // alice deletes it: bob keeps the deleted file's inode.
        let before = Self.cost(bob.process.processIdentifier)
        try FileManager.default.removeItem(atPath: aliceFile)
        func kept(_ reason: String) throws -> [String: Any]? {
            let history = try VersionsTests.json(env, bob, ["history", bobFolder + "/movie.mov"])
            return (history["versions"] as? [[String: Any]] ?? []).first { $0["local"] as? Bool == true && $0["reason"] as? String == reason }
        }
        var deleted: [String: Any] = [:]
        try FolderSyncTests.eventually("bob keeps the version alice's deletion replaced", timeout: 60) {
            deleted = (try? kept("peer-delete")) ?? [:] ?? [:]
            return !deleted.isEmpty && !FileManager.default.fileExists(atPath: bobFolder + "/movie.mov")
        }
        let after = Self.cost(bob.process.processIdentifier)
        print("version pack: bob applied the deletion of a \(size >> 20) MiB file and kept the version: "
              + "\(after.written - before.written) bytes written, \(String(format: "%.2f", after.cpu - before.cpu)) CPU-s")
        #expect(deleted["held"] as? Bool == true && deleted["size"] as? Int == size, "\(deleted)")
        #expect(chunks() < 1 << 20, "\(chunks()) bytes copied into .chunks for a deleted \(size)-byte file")
        #expect(packs() == Int64(size), "\(packs()) bytes in .packs")

        // alice writes another movie.mov; bob restores the deleted one over it.
        try TestFiles.random(aliceFile, size: size, mtime: nil)
        let second = try #require(VersionsTests.bytes(aliceFile))
        try FolderSyncTests.eventually("the new movie.mov reaches bob", timeout: 60) { VersionsTests.bytes(bobFolder + "/movie.mov") == second }
        let id = try #require(deleted["id"] as? String)
        let restored = try VersionsTests.json(env, bob, ["restore", bobFolder + "/movie.mov", "--version", id])
        #expect((restored["restored"] as? [[String: Any]])?.first?["from"] as? String == "local", "\(restored)")
        #expect(VersionsTests.bytes(bobFolder + "/movie.mov") == original)
        let replaced = try #require(try kept("restore"), "the file the restore replaced is not kept")
        #expect(replaced["held"] as? Bool == true && replaced["size"] as? Int == size, "\(replaced)")
        #expect(chunks() < 1 << 20, "\(chunks()) bytes copied into .chunks for a restore over a \(size)-byte file")
        #expect(packs() == Int64(2 * size), "\(packs()) bytes in .packs")
        let back = try VersionsTests.json(env, bob, ["restore", bobFolder + "/movie.mov", "--version", try #require(replaced["id"] as? String),
                                                     "--to", env.home("out") + "/second.mov"])
        #expect((back["restored"] as? [[String: Any]])?.first?["from"] as? String == "local", "\(back)")
        #expect(VersionsTests.bytes(env.home("out") + "/second.mov") == second)

        let verified = try VersionsTests.json(env, bob, ["verify", bobFolder])
        #expect((verified["versions"] as? Int ?? 0) >= 2 && verified["versionsDamaged"] as? Int == 0, "\(verified)")
    }
}
