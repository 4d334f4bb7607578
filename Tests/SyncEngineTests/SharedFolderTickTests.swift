import Foundation
import PeerIndex
@testable import SyncEngine
import Testing

/// The folder's periodic tick (a whole rescan when one is due, else a look at the root) is a
/// chain of `io.asyncAfter` closures, not a dispatch source the folder holds: it repeats on
/// its schedule, and `stop` ends it even while something still holds the folder.
@Suite struct SharedFolderTickTests {
    @Test func thePeriodicRescanRepeatsAndEndsWhenTheFolderStops() throws {
        let fixture = try FolderHostTests.Fixture()
        defer { fixture.cleanup() }
        let folder = SharedFolder(id: fixture.folderID, root: fixture.root, label: "docs", host: fixture.host)
        folder.start(rescanInterval: .milliseconds(200), watchDelay: .milliseconds(50))
        try TransferPair.eventually("the first scan is done") { folder.status == .idle }
        // Two more whole scans, by the timer alone.
        let first = folder.lastFullScan.uptimeNanoseconds
        try TransferPair.eventually("a rescan runs", timeout: 5) { folder.lastFullScan.uptimeNanoseconds > first }
        let second = folder.lastFullScan.uptimeNanoseconds
        try TransferPair.eventually("and another", timeout: 5) { folder.lastFullScan.uptimeNanoseconds > second }

        folder.stop()
        // Stopped (watcher off): a file written now is never recorded, and no scan runs, over
        // five rescan intervals.
        let stoppedAt = folder.lastFullScan.uptimeNanoseconds
        try "after".write(toFile: fixture.root + "/late.txt", atomically: false, encoding: .utf8)
        Thread.sleep(forTimeInterval: 1)
        #expect(folder.lastFullScan.uptimeNanoseconds == stoppedAt)
        #expect(try fixture.host.index.file(folderID: fixture.folderID, path: "late.txt") == nil)
    }
}
