import Foundation
@testable import PeerIndex
@testable import SyncEngine
import Synchronization
import Testing

/// Issue 42.2, a background path: a pull whose index read fails acted on the empty answer
/// (no local record: the peer's version planned as new over the file here) and said
/// nothing. Now it stops before planning, changes nothing, shows the index's error as the
/// folder's, and tries again: once the index reads, the change arrives and the error goes.
@Suite struct IndexFailurePullTests {
    @Test func aPullThatCannotReadTheIndexChangesNothingShowsWhyAndTriesAgain() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "one".write(toFile: docs + "/a.txt", atomically: false, encoding: .utf8)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        let received = pair.bob.directory + "/docs/a.txt"
        try TransferPair.eventually("bob has a.txt") { (try? String(contentsOfFile: received, encoding: .utf8)) == "one" }
        let folder = try #require(pair.bob.folders.queue.sync { pair.bob.folders.state.withLock { $0.folders[shared.folder] } })
        try IndexFailureTests.damage(pair.bob.index, table: "files")
        try "two, from alice".write(toFile: docs + "/a.txt", atomically: false, encoding: .utf8)
        try TransferPair.eventually("bob's folder shows why it does not pull") {
            folder.error?.contains("cannot read the index") == true
        }
        let error = try #require(folder.error)
        #expect(error.contains("no such table: files") && error.contains("nothing changed"), "\(error)")
        #expect(folder.status == .error)
        #expect(try String(contentsOfFile: received, encoding: .utf8) == "one")
        // The index reads again: the next try pulls alice's edit, and the error goes.
        try pair.bob.index.write { db in try db.execute("ALTER TABLE files_damaged RENAME TO files") }
        try TransferPair.eventually("the retry pulls the edit") {
            (try? String(contentsOfFile: received, encoding: .utf8)) == "two, from alice"
        }
        try TransferPair.eventually("the error goes") { folder.error == nil }
    }
}
