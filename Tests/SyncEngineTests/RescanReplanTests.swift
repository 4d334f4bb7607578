import Foundation
import PeerIndex
import PeerModel
@testable import SyncEngine
import Testing

/// A rescan of some paths plans its changes again (one may conflict with a state a peer sent
/// before the scan saw it), a page at a time read back from the index: the paths are never
/// all held at once (at 100,000 new files that set was ~10 MB), and none is left out.
@Suite struct RescanReplanTests {
    typealias Fixture = FolderHostTests.Fixture

    @Test func aRescansChangesArePlannedAgainInPagesAndNoneIsLeftOut() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        // (The watcher waits 30 s: the rescan below is the only one, and takes in its events.)
        let folder = SharedFolder(id: fixture.folderID, root: fixture.root, label: "docs", host: fixture.host)
        folder.start(rescanInterval: .seconds(3600), watchDelay: .seconds(30))
        defer { folder.stop() }
        try TransferPair.eventually("the first scan is done") { folder.status == .idle }
        folder.io.sync {}   // (and the first pull after it)
        folder.rescanReplan.setPage(2)
        // The peer's states of five paths are stored, their pull not run; then the same five
        // are written here, older than the peer's (the tie goes to the peer: theirs is taken,
        // ours kept as a conflict copy), after six files no peer has: 11 changes, 6 pages,
        // the last of one contested path.
        let contested = (0..<5).map { "z\($0).txt" }
        for (n, path) in contested.enumerated() {
            try fixture.remoteHas(path, size: 7, seed: UInt64(20 + n), content: Data("theirs\(n)".utf8))
        }
        let planned = folder.peerPlannedPaths
        let written = (0..<6).map { "new\($0).txt" } + contested
        for path in written {
            let file = fixture.root + "/" + path
            try "ours: \(path)".write(toFile: file, atomically: false, encoding: .utf8)
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_600_000_000)], ofItemAtPath: file)
        }
        folder.io.async { folder.fullScanPaths(written) }
        try TransferPair.eventually("every contested path holds the peer's version, ours kept as a conflict copy") {
            contested.enumerated().allSatisfy { n, path in
                fixture.holds(path, Data("theirs\(n)".utf8))
                    && fixture.names.contains { $0.hasPrefix(path.dropLast(4) + ".sync-conflict-") }
            }
        }
        folder.io.sync {}
        let counts = folder.rescanReplan.counts
        // The rescan's 11 changes in 6 pages, then the rescan of the 5 conflict copies its pulls made.
        #expect(counts.mostHeld == 2 && counts.paths == 16 && counts.pages >= 9,
                "\(counts.paths) paths in \(counts.pages) pages of at most \(counts.mostHeld)")
        #expect(folder.peerPlannedPaths - planned == 5)
        #expect(try fixture.host.index.files(folderID: fixture.folderID).filter { $0.path.hasPrefix("new") }.count == 6)
    }
}
