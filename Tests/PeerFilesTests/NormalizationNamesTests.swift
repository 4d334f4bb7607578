import Foundation
import Glibc
@testable import PeerFiles
import Testing

/// Names that differ only by Unicode normalization are two paths: keys, the scanner's merge
/// with what it knows, and the count of such twins per directory.
@Suite struct NormalizationNamesTests {
    static let composed = "caf\u{E9}.txt", decomposed = "cafe\u{301}.txt", kelvin = "\u{212A}", capitalK = "K"

    /// Known entries in byte order, as the index gives them.
    struct Known: KnownEntrySource {
        let entries: [ScannedEntry]
        func knownEntries(under prefix: String) -> any IteratorProtocol<ScannedEntry> {
            entries.sorted { PathKey($0.path) < PathKey($1.path) }.makeIterator()
        }
        func movedFile(path: String, inode: UInt64, size: Int64, mtimeNs: Int64) -> ScannedEntry? { nil }
    }

    @Test func pathKeysKeepCanonicallyEquivalentNamesApart() {
        #expect(Self.composed == Self.decomposed, "String takes them as one (the cause)")
        #expect(Set([Self.composed, Self.decomposed]).count == 1)
        #expect(PathKey(Self.composed) != PathKey(Self.decomposed))
        #expect([Self.composed, Self.decomposed, Self.composed].pathKeys.count == 2)
        #expect([PathKey(Self.composed): 1, PathKey(Self.decomposed): 2].count == 2)
        #expect(PathKey(Self.decomposed) < PathKey(Self.composed), "byte order: \"e\" (0x65) before 0xC3")
    }

    @Test(arguments: [
        ([composed, decomposed, "other.txt"], [composed, decomposed]),
        ([kelvin, capitalK, "k"], [kelvin, capitalK]),
        (["a.txt", "b.txt"], []),
        (["caf\u{E9}.txt", "cafe.txt"], []),
    ])
    func twinsAreFound(names: [String], twins: [String]) {
        #expect(NormalizationTwins.find(names).map { Array($0.utf8) } == twins.map { Array($0.utf8) })
    }

    /// A decomposed name made beside a known composed one is a new path, and the composed
    /// one is unchanged (before, the walk took the known composed entry for the decomposed
    /// file: the one was reported changed, the other new).
    @Test func aTwinBesideAKnownNameIsNewAndTheKnownOneUnchanged() throws {
        try withTemporaryDirectory { dir in
            try Tree.write(dir + "/" + Self.composed, "composed")
            let scanner = FolderScanner(root: dir)
            var first: [ScannedEntry] = []
            _ = try scanner.scan(known: Known(entries: [])) { first += $0.added }
            try #require(first.count == 1)
            try Tree.write(dir + "/" + Self.decomposed, "decomposed")
            var batches = ScanBatch()
            let summary = try scanner.scan(known: Known(entries: first)) { batch in
                batches.added += batch.added
                batches.changed += batch.changed
                batches.deleted += batch.deleted
            }
            #expect(batches.added.map { Array($0.path.utf8) } == [Array(Self.decomposed.utf8)])
            #expect(batches.changed.isEmpty && batches.deleted.isEmpty, "\(batches)")
            #expect(summary.normalizationTwins == [PathKey(""): 2])
            #expect(summary.normalizationTwinNames.map { Array($0.utf8) } == [Self.composed, Self.decomposed].map { Array($0.utf8) })
        }
    }
}

/// The watcher keeps two folders whose names differ only by Unicode normalization apart.
@Suite(.serialized) struct NormalizationWatchTests {
    /// The composed folder renamed: the decomposed one's watch keeps its own path (before,
    /// it moved with its twin, and a file made in it was reported under the new name).
    @Test func renamingOneTwinFolderLeavesTheOthersWatch() throws {
        try withTemporaryDirectory { dir in
            let composed = "Ordner-caf\u{E9}", decomposed = "Ordner-cafe\u{301}"
            try Tree.mkdir(dir + "/" + composed)
            try Tree.mkdir(dir + "/" + decomposed)
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, delay: FolderWatcherTests.quick, onChanges: log.callback)
            defer { watcher.stop() }
            #expect(watcher.watchedDirectories == 3)
            #expect(rename(dir + "/" + composed, dir + "/moved") == 0)
            #expect(log.wait { $0.changes.contains(.renamed(from: composed, to: "moved")) })
            try Tree.write(dir + "/" + decomposed + "/x.txt", "in the decomposed folder")
            let expected = Array((decomposed + "/x.txt").utf8)
            let reported = log.wait { log in
                log.changes.contains { if case .changed(let path) = $0 { return Array(path.utf8) == expected } else { return false } }
            }
            #expect(reported, "\(log.changes)")
            #expect(!log.changedPaths.contains("moved/x.txt"))
        }
    }
}
