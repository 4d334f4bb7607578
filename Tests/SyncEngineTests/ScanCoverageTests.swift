import Dispatch
import Foundation
import PeerFiles
import PeerIndex
@testable import SyncEngine
import Synchronization
import Testing

/// A completed scan stands for the watcher batches whose newest event it came after
/// (`syncpeer rescan` then the watcher's batch of the same writes read the tree twice), and
/// for no batch with a change made once it had started.
@Suite struct ScanCoverageTests {
    /// (scans as (start, paths or nil for whole), batch's newest event, batch paths, paths left to scan)
    static let cases: [([(Int64, [String]?)], Int64, [String], [String])] = [
        ([], 10, ["a"], ["a"]),
        ([(20, nil)], 10, ["a", "b/c"], []),
        ([(10, nil)], 10, ["a"], ["a"]),                   // started with the event: not after it
        ([(5, nil)], 10, ["a"], ["a"]),
        ([(20, ["dir"])], 10, ["dir", "dir/x", "dirx", "x"], ["dirx", "x"]),
        ([(5, ["dir"])], 10, ["dir/x"], ["dir/x"]),
        ([(20, ["dir"]), (30, nil)], 35, ["dir/x"], ["dir/x"]),
        ([(30, nil), (20, ["dir"])], 25, ["dir/x"], []),
        ([(20, ["caf\u{E9}"])], 10, ["cafe\u{301}/x"], ["cafe\u{301}/x"]),   // bytes, not canonical equivalence
    ]

    @Test(arguments: Self.cases)
    func aScanCoversTheBatchPathsItTookInAfterTheirEvents(scans: [(Int64, [String]?)], newest: Int64, paths: [String],
                                                         left: [String]) {
        var coverage = ScanCoverage()
        for (start, scanned) in scans { coverage.completed(paths: scanned, startedNs: start) }
        #expect(coverage.uncovered(paths, newestEventNs: newest) == left)
    }

    /// A folder started on the fixture (watching, no periodic rescan), once its first scan is done.
    static func watchedFolder(_ fixture: FolderHostTests.Fixture) throws -> SharedFolder {
        let folder = SharedFolder(id: fixture.folderID, root: fixture.root, label: "docs", host: fixture.host)
        folder.start(rescanInterval: .seconds(3600), watchDelay: .milliseconds(200))
        try TransferPair.eventually("the first scan is done") { folder.status == .idle }
        return folder
    }

    /// The bench's case: files written, `syncpeer rescan`, then the watcher's batch of the
    /// same writes (delivered after the rescan started): the rescan recorded every file and
    /// the batch is not scanned again.
    @Test func aBatchARescanAlreadyTookInIsNotScannedAgain() throws {
        let fixture = try FolderHostTests.Fixture()
        defer { fixture.cleanup() }
        let folder = try Self.watchedFolder(fixture)
        defer { folder.stop() }
        let gate = DispatchSemaphore(value: 0)
        folder.io.async { gate.wait(); folder.fullScan() }   // the rescan, queued before the batches
        try FileManager.default.createDirectory(atPath: fixture.root + "/new", withIntermediateDirectories: true)
        for i in 0..<10 {
            try "file \(i)".write(toFile: fixture.root + "/f\(i).txt", atomically: false, encoding: .utf8)
            try "new \(i)".write(toFile: fixture.root + "/new/n\(i).txt", atomically: false, encoding: .utf8)
        }
        Thread.sleep(forTimeInterval: 1)   // the watcher reads the events (within ~10 ms) before the rescan starts
        gate.signal()
        try TransferPair.eventually("the batches are handled") { folder.scanCoverage.coveredPaths > 0 || folder.scanCoverage.partScans > 0 }
        Thread.sleep(forTimeInterval: 0.5)   // any later batch of the same writes too
        folder.io.sync {}
        #expect(folder.scanCoverage.partScans == 0)
        for i in 0..<10 {
            #expect(try fixture.host.index.file(folderID: fixture.folderID, path: "f\(i).txt")?.size == Int64("file \(i)".utf8.count))
            #expect(try fixture.host.index.file(folderID: fixture.folderID, path: "new/n\(i).txt")?.size == Int64("new \(i)".utf8.count))
        }
    }

    /// D's case: a tree moved into the folder and at once rescanned by its path. The rescan
    /// first has the watcher read what is queued (the move, and the listing of every new
    /// directory), so the batch of the move is covered too: the tree is read once.
    @Test func aTreeMovedInAndRescannedAtOnceIsReadOnce() throws {
        let fixture = try FolderHostTests.Fixture()
        defer { fixture.cleanup() }
        let folder = try Self.watchedFolder(fixture)
        defer { folder.stop() }
        let staging = (fixture.root as NSString).deletingLastPathComponent + "/tree"
        for d in 0..<300 {
            let dir = staging + "/d\(d % 10)/e\(d)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for f in 0..<2 { try "\(d).\(f)".write(toFile: dir + "/f\(f)", atomically: false, encoding: .utf8) }
        }
        #expect(rename(staging, fixture.root + "/tree") == 0)
        folder.io.async { folder.fullScanPaths(["tree"]) }   // what `syncpeer rescan DIR tree` queues
        try TransferPair.eventually("the move's batch is handled") { folder.scanCoverage.coveredPaths > 0 || folder.scanCoverage.partScans > 1 }
        Thread.sleep(forTimeInterval: 0.5)   // any later batch of the move too
        folder.io.sync {}
        #expect(folder.scanCoverage.partScans == 1, "the rescan only")
        #expect(try fixture.host.index.file(folderID: fixture.folderID, path: "tree/d9/e299/f1")?.size == 5)
    }

    /// A file written once the rescan has walked past it (its event read after the scan
    /// started) is scanned from its batch: it is recorded, not left for the next full scan.
    @Test func aChangeMadeDuringARescanIsStillScanned() throws {
        let fixture = try FolderHostTests.Fixture()
        defer { fixture.cleanup() }
        let folder = try Self.watchedFolder(fixture)
        defer { folder.stop() }
        let late = fixture.root + "/late.txt"
        folder.state.withLock { state in
            state.coverage.afterWalk = {
                guard !FileManager.default.fileExists(atPath: late) else { return }
                try? "written during the rescan".write(toFile: late, atomically: false, encoding: .utf8)
                Thread.sleep(forTimeInterval: 0.3)   // its event is read before the scan completes
            }
        }
        folder.io.async { folder.fullScan() }
        try TransferPair.eventually("the late file is recorded") {
            (try? fixture.host.index.file(folderID: fixture.folderID, path: "late.txt"))??.size == Int64("written during the rescan".utf8.count)
        }
    }
}
