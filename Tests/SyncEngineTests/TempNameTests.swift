import Foundation
import PeerFiles
import Testing
@testable import SyncEngine

/// The temporary file of a path: unique per path, short, ours, and never scanned.
@Suite struct TempNameTests {
    static let characters = ["a", "é", "漢", "😀"]

    /// Pairs of paths of 1–255 bytes in the last component that differ only in their last
    /// character (the first 200 characters alike, as in issue 10).
    static var rows: [(String, Int)] { characters.flatMap { c in (1...255).map { (c, $0) } } }

    /// Pinned: names on disk outlive versions (a temporary left by a killed daemon of any
    /// version is recognised), so they stay BLAKE2b-256 although content is BLAKE3 since
    /// protocol 4. Computed with `hashlib.blake2b(path, digest_size=32).hexdigest()[:32]`.
    @Test func tempNamesArePinned() {
        #expect(FolderApplier.tempName(forPath: "docs/report.txt") == ".8930bb4ec5aa65a1ce75b24fcdbd02a9.syncpeer-tmp")
        #expect(FolderApplier.asideName(forPath: "docs/report.txt") == ".a2f615df1a9b8e1440b81f762c744b11.syncpeer-tmp")
    }

    @Test(arguments: rows)
    func tempNamesAreUniqueShortAndIgnored(_ row: (String, Int)) {
        let count = max(0, (row.1 - 1) / row.0.utf8.count)
        let stem = String(repeating: row.0, count: count)
        for directory in ["", "photos/2024/"] {
            let a = directory + stem + "1", b = directory + stem + "2"
            let tempA = FolderApplier.tempName(forPath: a)
            #expect(tempA.utf8.count == 46, "fixed length whatever the name")
            #expect(tempA == FolderApplier.tempName(forPath: a), "the same path, the same temporary (resumable)")
            #expect(tempA != FolderApplier.tempName(forPath: b), "paths differing only at the end never share one")
            #expect(FolderApplier.isTempName(tempA))
            #expect(IgnorePatterns().isIgnored(directory + tempA, isDirectory: false), "never scanned or synced")
            #expect((try? SafePath.validateName(tempA)) != nil)
        }
    }

    /// The planner's conflict copies of long names fit and differ for names alike but at
    /// their end (a 230-byte name gave a 293-byte copy before).
    @Test(arguments: [1, 100, 200, 230, 254, 255])
    func conflictCopyNamesOfLongNamesFit(_ bytes: Int) {
        let a = String(repeating: "n", count: bytes - 1) + "1", b = String(repeating: "n", count: bytes - 1) + "2"
        let copyA = ConflictRules.conflictCopyName(for: "dir/" + a, mtimeNs: 1_700_000_000_000_000_000, device: devA, version: vv([devA: 2]))
        let copyB = ConflictRules.conflictCopyName(for: "dir/" + b, mtimeNs: 1_700_000_000_000_000_000, device: devA, version: vv([devA: 2]))
        #expect(copyA.utf8.count - 4 <= 255)
        #expect(copyA != copyB)
        #expect(ConflictName.isCopy(copyA, of: "dir/" + a))
    }
}

/// Temp files a failed pull kept inside a directory the user then moved (chaos seed 3: bob
/// moved `d2` to `d1/d1` while the temp of `d2/f0.txt` waited in it; it was left for ever).
@Suite struct StrandedTemporariesTests {
    @Test func aMovedDirectoryLosesTheTempsOfItsOldPlaceAndKeepsThoseOfFailingPathsAtItsNewOne() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stranded-\(UInt64.random(in: 0...UInt64.max))").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/d1/d1/inner", withIntermediateDirectories: true)
        let strandedTop = "d1/d1/" + FolderApplier.tempName(forPath: "d2/f0.txt")
        let strandedDeep = "d1/d1/inner/" + FolderApplier.tempName(forPath: "d2/inner/x")
        let keptHere = "d1/d1/" + FolderApplier.tempName(forPath: "d1/d1/g.txt")
        let elsewhere = "d1/" + FolderApplier.tempName(forPath: "d2/other")
        for path in [strandedTop, strandedDeep, keptHere, elsewhere, "d1/d1/user.txt"] {
            #expect(FileManager.default.createFile(atPath: root + "/" + path, contents: Data("x".utf8)))
        }
        let handle = try DirectoryHandle(path: root)
        let failures = FolderApplier.removeStrandedTemporaries(under: handle, movedTo: "d1/d1", failing: ["d1/d1/g.txt"])
        #expect(failures.isEmpty)
        let exists = { (path: String) in FileManager.default.fileExists(atPath: root + "/" + path) }
        #expect(!exists(strandedTop) && !exists(strandedDeep), "temps of paths at the old place go")
        #expect(exists(keptHere), "the kept temp of a failing path at its own place stays (its chunks are reused)")
        #expect(exists(elsewhere), "nothing outside the moved directory is touched")
        #expect(exists("d1/d1/user.txt"), "user files are never touched")
        // A file moved (not a directory) and a path no longer there: nothing to do.
        #expect(FolderApplier.removeStrandedTemporaries(under: handle, movedTo: "d1/d1/user.txt", failing: []).isEmpty)
        #expect(FolderApplier.removeStrandedTemporaries(under: handle, movedTo: "gone", failing: []).isEmpty)
    }
}
