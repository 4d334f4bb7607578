import PeerModel
import PeerIndex
import Testing
@testable import SyncEngine

/// Which watcher reports of files and directories the applier placed are left unscanned:
/// only a report whose path still shows exactly the recorded file (or the same directory),
/// once.
struct PlacedFilesTests {
    static func record(_ path: String, kind: FileKind = .file, size: Int64 = 4096, mtimeNs: Int64 = 7,
                       mode: UInt32 = 0o644, inode: UInt64? = 11, deleted: Bool = false) -> FileRecord {
        FileRecord(folderID: "f", FileEntry(path: path, kind: kind, size: size, mtimeNs: mtimeNs, mode: mode, deleted: deleted, version: ["d": 1], modifiedBy: "d"), inode: inode)
    }

    static let recorded = PlacedFiles.Mark(inode: 11, size: 4096, mtimeNs: 7, mode: 0o644)

    @Test(arguments: [
        ("the same file", PlacedFiles.Mark?.some(recorded), true),
        ("another inode (replaced)", .some(.init(inode: 12, size: 4096, mtimeNs: 7, mode: 0o644)), false),
        ("another size (appended to)", .some(.init(inode: 11, size: 4097, mtimeNs: 7, mode: 0o644)), false),
        ("another mtime (rewritten in place)", .some(.init(inode: 11, size: 4096, mtimeNs: 8, mode: 0o644)), false),
        ("other permissions", .some(.init(inode: 11, size: 4096, mtimeNs: 7, mode: 0o600)), false),
        ("not a file any more, or gone", nil, false),
    ])
    func aPlacedFileIsLeftOutOnlyWhileItIsExactlyWhatWasRecorded(name: String, found: PlacedFiles.Mark?, skipped: Bool) {
        var placed = PlacedFiles()
        placed.note([Self.record("a.txt")])
        #expect(placed.take("a.txt") { found } == skipped, "\(name)")
        // Used once: a second report of the path is scanned, whatever the disk shows.
        #expect(placed.take("a.txt") { Self.recorded } == false)
    }

    @Test func pathsNeverPlacedAreScannedWithoutAStat() {
        var placed = PlacedFiles()
        placed.note([Self.record("a.txt")])
        #expect(placed.take("b.txt") { Issue.record("no stat for a path without a mark"); return Self.recorded } == false)
    }

    static let directoryMark = PlacedFiles.Mark(inode: 11, size: 0, mtimeNs: 7, mode: 0o755, isDirectory: true)

    /// A directory the applier made: its mtime changes with every file placed in it (each
    /// reported on its own), so only its inode and mode say it is still the one recorded.
    /// Before, every directory record cleared its mark and the watcher's report of it was a
    /// scan of the whole directory (D: 5,000 directories, each walked again with its files).
    @Test(arguments: [
        ("the same directory, files placed in it since", PlacedFiles.Mark?.some(.init(inode: 11, size: 4096, mtimeNs: 9, mode: 0o755, isDirectory: true)), true),
        ("another directory at the path", .some(.init(inode: 12, size: 4096, mtimeNs: 7, mode: 0o755, isDirectory: true)), false),
        ("other permissions", .some(.init(inode: 11, size: 4096, mtimeNs: 7, mode: 0o700, isDirectory: true)), false),
        ("a file now, with the directory's inode", .some(.init(inode: 11, size: 0, mtimeNs: 7, mode: 0o755)), false),
        ("gone, or neither a file nor a directory", nil, false),
    ])
    func aMadeDirectoryIsLeftOutWhileItIsTheSameDirectory(name: String, found: PlacedFiles.Mark?, skipped: Bool) {
        var placed = PlacedFiles()
        placed.note([Self.record("docs", kind: .directory, size: 0, mode: 0o755)])
        #expect(placed.take("docs") { found } == skipped, "\(name)")
        #expect(placed.take("docs") { Self.directoryMark } == false, "used once")
    }

    @Test func aFileMarkIsNotMatchedByADirectory() {
        var placed = PlacedFiles()
        placed.note([Self.record("a.txt")])
        #expect(placed.take("a.txt") { .init(inode: 11, size: 4096, mtimeNs: 7, mode: 0o644, isDirectory: true) } == false)
    }

    @Test func deletionsLinksAndRecordsWithoutAnInodeClearTheMark() {
        for other in [Self.record("a.txt", deleted: true), Self.record("a.txt", kind: .directory),
                      Self.record("a.txt", kind: .symlink), Self.record("a.txt", inode: nil)] {
            var placed = PlacedFiles()
            placed.note([Self.record("a.txt")])
            placed.note([other])
            #expect(placed.take("a.txt") { Self.recorded } == false)
        }
    }

    @Test func aScanThatRecordedThePathDropsItsMark() {
        var placed = PlacedFiles()
        placed.note([Self.record("a.txt"), Self.record("b.txt", inode: 12)])
        placed.forget(["a.txt"])
        #expect(placed.take("a.txt") { Self.recorded } == false)
        #expect(placed.take("b.txt") { .init(inode: 12, size: 4096, mtimeNs: 7, mode: 0o644) } == true)
    }

    /// What the folder checks against the disk, outside its lock: the reported paths' marks
    /// only, moved out (a later report of them is scanned), the others kept.
    @Test func aBatchTakesOnlyTheMarksOfItsPaths() {
        var placed = PlacedFiles()
        placed.note([Self.record("a.txt"), Self.record("b.txt")])
        var taken = placed.takeMarks(of: ["a.txt", "c.txt", "a.txt"])
        #expect(taken.marks.keys.sorted() == ["a.txt"])
        #expect(taken.take("a.txt") { Self.recorded } == true)
        #expect(placed.take("a.txt") { Self.recorded } == false)
        #expect(placed.take("b.txt") { Self.recorded } == true)
    }

    @Test func pastTheLimitEveryMarkIsDropped() {
        var placed = PlacedFiles(limit: 3)
        placed.note((0..<3).map { Self.record("f\($0)") })
        #expect(placed.marks.count == 3)
        placed.note([Self.record("f3")])
        #expect(placed.isEmpty)
    }
}
