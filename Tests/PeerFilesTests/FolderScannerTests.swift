import Foundation
import Glibc
@testable import PeerFiles
import PeerModel
import Testing

@Suite struct FolderScannerTests {
    /// A nested tree with every kind of entry; returns the paths that must be reported.
    static func buildTree(_ dir: String) throws -> Set<String> {
        try Tree.write(dir + "/.syncpeerignore", "*.o\n/build/\n!keep.o\n")
        try Tree.write(dir + "/a.txt", "hello")
        try Tree.write(dir + "/empty.txt", "")
        try Tree.mkdir(dir + "/dir/sub")
        try writeFile(dir + "/dir/sub/deep.bin", pseudoRandomBytes(count: 300_000, seed: 1))
        try Tree.write(dir + "/dir/b.txt", "bee")
        try Tree.mkdir(dir + "/emptydir")
        Tree.symlink(dir + "/outside", to: "../../../etc/passwd")   // points outside: recorded, not followed
        Tree.symlink(dir + "/dirlink", to: "dir")                   // to a directory: not entered
        Tree.symlink(dir + "/dangling", to: "nowhere")
        // Ignored.
        try Tree.write(dir + "/x.o", "obj")
        try Tree.write(dir + "/dir/sub/y.o", "obj")
        try Tree.write(dir + "/dir/keep.o", "kept")                 // re-included by "!keep.o"
        try Tree.mkdir(dir + "/build/out")
        try Tree.write(dir + "/build/out/z.txt", "z")
        try Tree.mkdir(dir + "/dir/build")                          // "/build/" is anchored: this one counts
        try Tree.mkdir(dir + "/.syncpeer-partial")
        try Tree.write(dir + "/.syncpeer-partial/t.part", "partial")
        try Tree.write(dir + "/dir/c.txt.syncpeer-tmp", "temp")
        return ["a.txt", "empty.txt", "dir", "dir/sub", "dir/sub/deep.bin", "dir/b.txt",
                "emptydir", "outside", "dirlink", "dangling", "dir/keep.o", "dir/build"]
    }

    /// The tree of `buildTree`, scanned once: its scanner and what it knows.
    static func withScannedTree(_ body: (String, FolderScanner, inout KnownEntryList) throws -> Void) throws {
        try withTemporaryDirectory { dir in
            _ = try buildTree(dir)
            let scanner = FolderScanner(root: dir, ignores: try IgnorePatterns.load(from: DirectoryHandle(path: dir)))
            var known = KnownEntryList()
            try scanAndApply(scanner, &known)
            try body(dir, scanner, &known)
        }
    }

    @Test func firstScanReportsEverythingOnceAndFollowsNoLink() throws {
        try withTemporaryDirectory { dir in
            let expected = try Self.buildTree(dir)
            let root = try DirectoryHandle(path: dir)
            let scanner = FolderScanner(root: dir, ignores: try IgnorePatterns.load(from: root))
            var known = KnownEntryList()
            let (result, summary) = try scanAndApply(scanner, &known)
            #expect(Set(result.added.keys) == expected)
            #expect(result.changed.isEmpty && result.deleted.isEmpty && result.unstable.isEmpty)
            #expect(result.problems.isEmpty)
            #expect(summary.added == expected.count)
            #expect(summary.files == 5 && summary.directories == 4 && summary.symlinks == 3)
            #expect(summary.ignored == 6)   // x.o, dir/sub/y.o, build, .syncpeer-partial, the tmp file, .syncpeerignore
            let fileBytes: UInt64 = 300_000 + 5 + 3 + 4   // the ignore file is not read as content
            #expect(summary.bytesRead == fileBytes)

            let deep = try #require(result.added["dir/sub/deep.bin"])
            #expect(deep.kind == .file && deep.size == 300_000)
            #expect(deep.manifest == (try FileChunker.manifest(ofFileAt: dir + "/dir/sub/deep.bin")))
            #expect(deep.inode == UInt64(Tree.stat(dir + "/dir/sub/deep.bin").st_ino))
            #expect(deep.mtimeNs == Tree.mtimeNs(dir + "/dir/sub/deep.bin"))
            let empty = try #require(result.added["empty.txt"])
            #expect(empty.size == 0 && empty.manifest?.chunks.isEmpty == true)
            #expect(result.added["outside"]?.kind == .symlink)
            #expect(result.added["outside"]?.symlinkTarget == "../../../etc/passwd")
            #expect(result.added["outside"]?.manifest == nil)
            #expect(result.added["dirlink"]?.symlinkTarget == "dir")
            #expect(result.added["dangling"]?.symlinkTarget == "nowhere")
            #expect(result.added["emptydir"]?.kind == .directory)
            #expect(result.added["a.txt"]?.mode == UInt32(Tree.stat(dir + "/a.txt").st_mode) & 0o7777)
        }
    }

    @Test func rescanWithNothingChangedReadsNothing() throws {
        try Self.withScannedTree { dir, scanner, known in
            let (again, summary) = try scanAndApply(scanner, &known)
            #expect(again.batches.isEmpty)
            #expect(summary.bytesRead == 0)
            #expect(summary.filesHashed == 0)
            #expect(summary.files == 5)
        }
    }

    /// Renamed files (the kernel reported old → new path) are found at the new path and, when
    /// inode, size and mtime still match, reported as added with the known manifest: nothing
    /// read (a rename, a move into a new folder, a folder renamed, a rename over a file). A file
    /// whose content changed since, or one that only shares an inode number with a known file
    /// at another path, is read.
    @Test func renamedFilesAreTakenOverWithoutReading() throws {
        try Self.withScannedTree { dir, scanner, known in
            func at(_ path: String, _ entry: ScannedEntry) -> ScannedEntry {
                var moved = entry
                moved.path = path
                return moved
            }
            let deep = try #require(known["dir/sub/deep.bin"])
            let a = try #require(known["a.txt"])
            let bee = try #require(known["dir/b.txt"])

            #expect(rename(dir + "/dir/sub", dir + "/moved") == 0)
            try Tree.mkdir(dir + "/new")
            #expect(rename(dir + "/a.txt", dir + "/new/a-renamed.txt") == 0)
            #expect(rename(dir + "/dir/b.txt", dir + "/empty.txt") == 0)   // over another file
            let hints = [at("moved/deep.bin", deep), at("new/a-renamed.txt", a), at("empty.txt", bee)]
            let result = ScanResult()
            let summary = try scanner.scan(paths: ["dir/sub", "moved", "a.txt", "new", "dir/b.txt", "empty.txt"],
                                           known: KnownEntriesWithMoves(base: known, moved: hints)) { result.record($0) }
            #expect(summary.bytesRead == 0 && summary.filesHashed == 0 && summary.moved == 3)
            #expect(Set(result.added.keys) == ["moved", "moved/deep.bin", "new", "new/a-renamed.txt"])
            #expect(result.added["moved/deep.bin"]?.manifest == deep.manifest)
            #expect(result.added["new/a-renamed.txt"]?.manifest == a.manifest)
            #expect(Set(result.changed.keys) == ["empty.txt"])
            #expect(result.changed["empty.txt"]?.manifest == bee.manifest)
            #expect(Set(result.deleted) == ["dir/sub", "dir/sub/deep.bin", "a.txt", "dir/b.txt"])

            // Changed since (other size and mtime): read, as any new file.
            Tree.rewrite(dir + "/new/a-renamed.txt", "changed after the rename")
            let again = ScanResult()
            let second = try scanner.scan(paths: ["new/a-renamed.txt"],
                                          known: KnownEntriesWithMoves(base: known, moved: [at("new/a-renamed.txt", a)])) { again.record($0) }
            #expect(second.filesHashed == 1 && second.moved == 0)
            #expect(again.added["new/a-renamed.txt"]?.manifest?.rootHash
                    == (try FileChunker.manifest(ofFileAt: dir + "/new/a-renamed.txt")).rootHash)

            // Same inode, size and mtime, but no rename to this path: read.
            let elsewhere = ScanResult()
            let third = try scanner.scan(paths: ["moved/deep.bin"],
                                         known: KnownEntriesWithMoves(base: known, moved: [at("somewhere/else.bin", deep)])) { elsewhere.record($0) }
            #expect(third.filesHashed == 1 && third.moved == 0)
        }
    }

    @Test func changesAreReportedWithTheLeastReading() throws {
        try Self.withScannedTree { dir, scanner, known in
            let deepManifest = known["dir/sub/deep.bin"]?.manifest

            // Mode change only: reported, the known manifest is reused, nothing read.
            Tree.chmod(dir + "/dir/sub/deep.bin", 0o600)
            var (result, summary) = try scanAndApply(scanner, &known)
            #expect(result.reported == ["dir/sub/deep.bin"])
            #expect(result.changed["dir/sub/deep.bin"]?.mode == 0o600)
            #expect(result.changed["dir/sub/deep.bin"]?.manifest == deepManifest)
            #expect(summary.bytesRead == 0)

            // Same size, other content, other mtime: read again.
            let oldMtime = Tree.mtimeNs(dir + "/a.txt")
            Tree.rewrite(dir + "/a.txt", "HELLO")
            Tree.setMtime(dir + "/a.txt", ns: oldMtime + 1_000_000_000)
            (result, summary) = try scanAndApply(scanner, &known)
            #expect(result.reported == ["a.txt"])
            #expect(result.changed["a.txt"]?.manifest?.rootHash == (try FileChunker.manifest(ofFileAt: dir + "/a.txt")).rootHash)
            #expect(result.changed["a.txt"]?.manifest != nil)
            #expect(summary.bytesRead == 5)

            // Deleted file and a directory with content; a new file; a changed link target;
            // a file replaced by a directory; a new ignored file; a directory's mode.
            #expect(unlink(dir + "/empty.txt") == 0)
            try FileManager.default.removeItem(atPath: dir + "/dir/sub")
            try Tree.write(dir + "/new.txt", "new")
            #expect(unlink(dir + "/dirlink") == 0)
            Tree.symlink(dir + "/dirlink", to: "emptydir")
            #expect(unlink(dir + "/dir/b.txt") == 0)
            try Tree.mkdir(dir + "/dir/b.txt")
            try Tree.write(dir + "/dir/b.txt/inner", "in")
            try Tree.write(dir + "/ignored.o", "obj")
            Tree.chmod(dir + "/emptydir", 0o700)
            (result, summary) = try scanAndApply(scanner, &known)
            #expect(Set(result.deleted) == ["empty.txt", "dir/sub", "dir/sub/deep.bin"])
            #expect(Set(result.added.keys) == ["new.txt", "dir/b.txt/inner"])
            #expect(Set(result.changed.keys) == ["dirlink", "dir/b.txt", "emptydir"])
            #expect(result.changed["dirlink"]?.symlinkTarget == "emptydir")
            #expect(result.changed["dir/b.txt"]?.kind == .directory)
            #expect(result.changed["emptydir"]?.mode == 0o700)
            #expect(summary.bytesRead == 3 + 2)

            // And then nothing again.
            (result, summary) = try scanAndApply(scanner, &known)
            #expect(result.batches.isEmpty && summary.bytesRead == 0)
        }
    }

    @Test func newlyIgnoredPathsAreNotDeleted() throws {
        try withTemporaryDirectory { dir in
            try Tree.mkdir(dir + "/logs")
            try Tree.write(dir + "/logs/a.log", "a")
            try Tree.write(dir + "/b.log", "b")
            var known = KnownEntryList()
            try scanAndApply(FolderScanner(root: dir), &known)
            #expect(known.count == 3)
            let (result, _) = try scanAndApply(FolderScanner(root: dir, ignores: IgnorePatterns("logs/\n*.log")), &known)
            #expect(result.batches.isEmpty)
        }
    }

    @Test func resultsArriveInBatches() throws {
        try withTemporaryDirectory { dir in
            for i in 0..<35 { try Tree.write(dir + "/f\(i)", "\(i)") }
            var known = KnownEntryList()
            let (result, summary) = try scanAndApply(FolderScanner(root: dir, batchSize: 10), &known)
            #expect(result.batches.map(\.count) == [10, 10, 10, 5])
            #expect(summary.batches == 4 && summary.added == 35)
            for i in 0..<35 { #expect(unlink(dir + "/f\(i)") == 0) }
            let (gone, _) = try scanAndApply(FolderScanner(root: dir, batchSize: 10), &known)
            #expect(gone.deleted.count == 35 && gone.batches.count == 4)
            #expect(known.count == 0)
        }
    }

    @Test func walkOrderIsUTF8ByteOrder() throws {
        try withTemporaryDirectory { dir in
            // "a.txt" < "a/…" < "a0" in bytes ('.' < '/' < '0').
            try Tree.mkdir(dir + "/a/b")
            for p in ["a.txt", "a/x", "a/b/y", "a0", "é", "Z", "a-"] { try Tree.write(dir + "/" + p, p) }
            var order: [String] = []
            try FolderScanner(root: dir).scan(known: KnownEntryList()) { order += $0.added.map(\.path) }
            #expect(order == order.sorted(by: utf8Less))
            #expect(order == ["Z", "a", "a-", "a.txt", "a/b", "a/b/y", "a/x", "a0", "é"])
        }
    }

    @Test func filesChangingWhileReadAreUnstable() throws {
        try withTemporaryDirectory { dir in
            try Tree.write(dir + "/busy.txt", "first")
            try Tree.write(dir + "/calm.txt", "calm")
            var scanner = FolderScanner(root: dir)
            let busy = dir + "/busy.txt"
            scanner.afterReadHook = { path in
                if path == "busy.txt" {
                    let fd = open(busy, O_WRONLY | O_APPEND)
                    _ = Glibc.write(fd, "more", 4)
                    close(fd)
                }
            }
            var known = KnownEntryList()
            let (result, summary) = try scanAndApply(scanner, &known)
            #expect(result.unstable == ["busy.txt"])
            #expect(Set(result.added.keys) == ["calm.txt"])
            #expect(summary.unstable == 1)
            #expect(known["busy.txt"] == nil)
            // A later scan without interference picks it up.
            let (later, _) = try scanAndApply(FolderScanner(root: dir), &known)
            #expect(later.added["busy.txt"]?.size == 9)
        }
    }

    @Test func rootMissingThrowsAndDeletesNothing() throws {
        try withTemporaryDirectory { dir in
            let root = dir + "/folder"
            try Tree.mkdir(root)
            try Tree.write(root + "/a.txt", "a")
            var known = KnownEntryList()
            try scanAndApply(FolderScanner(root: root), &known)
            let identity = try FolderScanner(root: root).scan(known: known) { _ in }.root

            try FileManager.default.removeItem(atPath: root)
            var reported = 0
            #expect(throws: ScanError.rootMissing(path: root, reason: "it does not exist")) {
                try FolderScanner(root: root).scan(known: known) { reported += $0.count }
            }
            #expect(throws: ScanError.rootMissing(path: root + "/x", reason: "it does not exist")) {
                try FolderScanner(root: root + "/x").scan(paths: ["a.txt"], known: known) { reported += $0.count }
            }
            try Tree.write(root, "now a file")
            #expect(throws: ScanError.rootMissing(path: root, reason: "it is not a directory")) {
                try FolderScanner(root: root).scan(known: known) { reported += $0.count }
            }
            // Another directory in its place (an unmounted disk's empty mount point has
            // another device and inode; a recreated directory may reuse the inode number,
            // so the test uses an identity that cannot be this directory's).
            #expect(unlink(root) == 0)
            try Tree.mkdir(root)
            let other = RootIdentity(device: identity.device, inode: identity.inode &+ 1)
            let now = try FolderScanner(root: root).scan(known: KnownEntryList()) { _ in }.root
            #expect(throws: ScanError.self) {
                try FolderScanner(root: root, expectedRoot: now == other ? identity : other)
                    .scan(known: known) { reported += $0.count }
            }
            #expect(reported == 0)
        }
    }

    @Test func rootVanishingDuringTheScanStopsBeforeDeletions() throws {
        try withTemporaryDirectory { dir in
            let root = dir + "/folder"
            try Tree.mkdir(root + "/sub")
            for i in 0..<20 { try Tree.write(root + "/sub/f\(i)", "\(i)") }
            var known = KnownEntryList()
            try scanAndApply(FolderScanner(root: root), &known)
            // The tree is gone, and the root replaced, while the scan runs (after it opened the root).
            try Tree.write(root + "/trigger", "t")
            var scanner = FolderScanner(root: root, batchSize: 5)
            scanner.afterReadHook = { _ in
                try? FileManager.default.removeItem(atPath: root)
                try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
            }
            var deleted = 0
            #expect(throws: ScanError.self) {
                try scanner.scan(known: known) { deleted += $0.deleted.count }
            }
            #expect(deleted == 0)
        }
    }

    @Test func scanOfGivenPathsOnly() throws {
        try withTemporaryDirectory { dir in
            try Tree.mkdir(dir + "/d/sub")
            try Tree.mkdir(dir + "/other")
            for p in ["d/sub/a", "d/sub/b", "d/c", "other/o", "top"] { try Tree.write(dir + "/" + p, p) }
            var known = KnownEntryList()
            try scanAndApply(FolderScanner(root: dir), &known)

            try Tree.write(dir + "/d/sub/new", "new")
            #expect(unlink(dir + "/d/sub/a") == 0)
            #expect(unlink(dir + "/top") == 0)
            try Tree.write(dir + "/other/unseen", "x")   // not among the given paths
            let (result, summary) = try scanAndApply(FolderScanner(root: dir), &known,
                                                     paths: ["d/sub", "d/sub/new", "top", "missing/deeper", "/d/sub/"])
            #expect(Set(result.added.keys) == ["d/sub/new"])
            #expect(Set(result.deleted) == ["d/sub/a", "top"])
            #expect(result.changed.isEmpty)
            #expect(summary.bytesRead == 3)

            // A directory that vanished: it and everything known below it.
            try FileManager.default.removeItem(atPath: dir + "/d")
            let (gone, _) = try scanAndApply(FolderScanner(root: dir), &known, paths: ["d/sub/b", "d"])
            #expect(Set(gone.deleted) == ["d", "d/sub", "d/sub/b", "d/sub/new", "d/c"])
            // A path whose parent is now a symbolic link is not followed.
            Tree.symlink(dir + "/d", to: "other")
            let (linked, _) = try scanAndApply(FolderScanner(root: dir), &known, paths: ["d/o"])
            #expect(linked.batches.isEmpty)
            let (whole, _) = try scanAndApply(FolderScanner(root: dir), &known, paths: [""])
            #expect(Set(whole.added.keys) == ["d", "other/unseen"])
            #expect(known["d"]?.kind == .symlink)
        }
    }

    @Test func unsortedKnownEntriesAreRefused() throws {
        struct Unsorted: KnownEntrySource {
            func knownEntries(under prefix: String) -> any IteratorProtocol<ScannedEntry> {
                [ScannedEntry(path: "b", kind: .file, size: 0, mtimeNs: 0, mode: 0, inode: 0),
                 ScannedEntry(path: "a", kind: .file, size: 0, mtimeNs: 0, mode: 0, inode: 0)].makeIterator()
            }
        }
        try withTemporaryDirectory { dir in
            try Tree.write(dir + "/c", "c")
            #expect(throws: ScanError.knownEntriesOutOfOrder(previous: "b", next: "a")) {
                try FolderScanner(root: dir).scan(known: Unsorted()) { _ in }
            }
        }
    }

    @Test func namesThatCannotBeSyncedAreProblems() throws {
        try withTemporaryDirectory { dir in
            try Tree.write(dir + "/back\\slash", "x")
            let bad: [CChar] = [0x62, 0x61, 0x64, CChar(bitPattern: 0xFF), 0]   // "bad\xFF"
            let fd = bad.withUnsafeBufferPointer { name -> Int32 in
                let dfd = open(dir, O_RDONLY | O_DIRECTORY)
                defer { close(dfd) }
                return openat(dfd, name.baseAddress!, O_CREAT | O_WRONLY, 0o644)
            }
            close(fd)
            try Tree.write(dir + "/fine", "ok")
            var known = KnownEntryList()
            let (result, _) = try scanAndApply(FolderScanner(root: dir), &known)
            #expect(Set(result.added.keys) == ["fine"])
            #expect(result.problems.count == 2)
        }
    }

    /// 100,000 small files in 100 directories: one pass, then a rescan that reads nothing.
    @Test func hundredThousandFiles() throws {
        try withTemporaryDirectory { dir in
            let created = seconds {
                let payload = Array("0123456789abcdef".utf8)
                for d in 0..<100 {
                    let sub = dir + "/d\(d)"
                    mkdir(sub, 0o755)
                    let dfd = open(sub, O_RDONLY | O_DIRECTORY)
                    for f in 0..<1_000 {
                        let fd = openat(dfd, "f\(f)", O_CREAT | O_WRONLY | O_TRUNC, 0o644)
                        _ = payload.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, (f % 16) + 1) }
                        close(fd)
                    }
                    close(dfd)
                }
            }
            var known = KnownEntryList()
            var batches = 0
            var maxBatch = 0
            var summary = ScanSummary()
            let first = try seconds {
                summary = try FolderScanner(root: dir).scan(known: known) { batch in
                    batches += 1
                    maxBatch = max(maxBatch, batch.count)
                    known.apply(batch)
                }
            }
            #expect(summary.added == 100_100)
            #expect(summary.files == 100_000)
            #expect(known.count == 100_100)
            #expect(maxBatch <= 1_000 && batches >= 100)
            var rescan = ScanSummary()
            let second = try seconds {
                rescan = try FolderScanner(root: dir).scan(known: known) { _ in Issue.record("nothing changed") }
            }
            #expect(rescan.bytesRead == 0 && rescan.filesHashed == 0 && rescan.files == 100_000)
            print("100k files: created in \(created) s, first scan \(first) s (\(summary.bytesRead) bytes read, \(batches) batches), rescan \(second) s (\(rescan.bytesRead) bytes read)")
        }
    }
}
