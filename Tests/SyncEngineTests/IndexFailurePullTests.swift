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
    /// Alice's folder `docs` holding a.txt ("one").
    static func docs(_ pair: TransferPair) throws -> String {
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "one".write(toFile: docs + "/a.txt", atomically: false, encoding: .utf8)
        return docs
    }

    /// Alice's `docs` shared with bob, not connected yet, once alice has scanned a.txt: its ID.
    static func sharedUnconnected(_ pair: TransferPair) throws -> String {
        let shared = try pair.alice.folders.share(directory: try docs(pair), with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("alice has scanned a.txt") {
            ((try? pair.alice.index.file(folderID: shared.folder, path: "a.txt")) ?? nil) != nil
        }
        return shared.folder
    }

    @Test func aPullThatCannotReadTheIndexChangesNothingShowsWhyAndTriesAgain() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        let docs = try Self.docs(pair)
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

    /// Alice's index pages for a member: a read that failed sent an empty page and ended
    /// the pass without a word (bob waited for the next change). Now it is an error event,
    /// and the pass starts again by itself.
    @Test func indexPagesThatCannotBeReadAreReportedAndSentLater() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        let folder = try Self.sharedUnconnected(pair)
        try IndexFailureTests.damage(pair.alice.index, table: "files")
        pair.connect()
        try TransferPair.eventually("the failed page is reported") {
            pair.alice.events.errors.contains { $0.contains("cannot read the index to send to bob") }
        }
        let report = try #require(pair.alice.events.errors.first { $0.contains("cannot read the index to send") })
        #expect(report.contains("no such table: files") && report.contains("trying again"), "\(report)")
        #expect(!FileManager.default.fileExists(atPath: pair.bob.directory + "/docs/a.txt"))
        try pair.alice.index.write { db in try db.execute("ALTER TABLE files_damaged RENAME TO files") }
        try TransferPair.eventually("the pass starts again and bob gets a.txt") {
            (try? String(contentsOfFile: pair.bob.directory + "/docs/a.txt", encoding: .utf8)) == "one"
        }
    }

    /// Every trigger of a pass (a change of the folder, a share answer) while alice's index
    /// could not be read started another retry chain, each saying the error again at every
    /// try. Now the pass is held with one retry: the error is said once however often the
    /// folder changes, the pass goes on once the index reads, and a new failure is said again.
    @Test func aPassThatCannotReadTheIndexHasOneRetryHoweverOftenItIsTriggered() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        let folder = try Self.sharedUnconnected(pair)
        let retry: Duration = .milliseconds(100)
        pair.alice.folders.state.withLock { $0.indexRetry.delay = retry }
        try IndexFailureTests.damage(pair.alice.index, table: "files")
        pair.connect()
        let said = { pair.alice.events.errors.filter { $0.contains("cannot read the index to send to bob") }.count }
        try TransferPair.eventually("the failed page is reported") { said() >= 1 }
        let start = ContinuousClock.now
        for _ in 0..<20 { pair.alice.folders.folderChanged(folder) }
        Thread.sleep(forTimeInterval: 1)
        let held = pair.alice.folders.state.withLock { $0.indexRetry.held.values.map(\.failures) }
        let periods = Int((ContinuousClock.now - start) / retry)
        // One chain tries once a period (fewer on a loaded machine); 21 chains, 21 times as often.
        #expect(held.count == 1 && held[0] >= 2 && held[0] <= periods + 2, "\(held) failures in \(periods) periods")
        #expect(said() == 1, "\(pair.alice.events.errors)")
        try pair.alice.index.write { db in try db.execute("ALTER TABLE files_damaged RENAME TO files") }
        try TransferPair.eventually("the pass goes on and bob gets a.txt") {
            (try? String(contentsOfFile: pair.bob.directory + "/docs/a.txt", encoding: .utf8)) == "one"
        }
        #expect(pair.alice.folders.state.withLock { $0.indexRetry.held.isEmpty })
        // Broken again: news, said again.
        try IndexFailureTests.damage(pair.alice.index, table: "files")
        pair.alice.folders.folderChanged(folder)
        try TransferPair.eventually("the new failure is reported") { said() == 2 }
    }
}
