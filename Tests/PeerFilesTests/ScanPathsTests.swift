@testable import PeerFiles
import Testing

/// The paths given to `FolderScanner.scan(paths:)`: taken as they are when already clean (a
/// folder moved in comes from the watcher as its 55,000 paths in D), and a path below
/// another given one is covered by it.
@Suite struct ScanPathsTests {
    @Test func cleanPathsAreRelativeWithoutEmptyComponents() {
        for clean in ["a", "a/b", "dir/sub/deep.bin", "é/ü"] { #expect(FolderScanner.isClean(clean), "\(clean)") }
        for unclean in ["", "/", "/a", "a/", "a//b", "//"] { #expect(!FolderScanner.isClean(unclean), "\(unclean)") }
    }

    @Test func onlyAPathUnderADirectoryIsBelowIt() {
        #expect(FolderScanner.isBelow("d/x", "d"))
        #expect(FolderScanner.isBelow("d/x/y", "d/x"))
        #expect(!FolderScanner.isBelow("dx", "d"))
        #expect(!FolderScanner.isBelow("d", "d"))
        #expect(!FolderScanner.isBelow("d-/x", "d"))
        #expect(!FolderScanner.isBelow("c/x", "d"))
    }
}
