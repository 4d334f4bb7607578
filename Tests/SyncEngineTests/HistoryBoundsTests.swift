import Foundation
import PeerIndex
import PeerWire
import Synchronization
@testable import SyncEngine
import Testing

/// Issue 41, "version listings are bounded in count": a member that keeps more versions of a
/// folder than `history` takes from one device is asked page after page only up to the
/// bound (`HistoryResult.limit`), and the listing says it was cut.
@Suite struct HistoryBoundsTests {
    @Test func historyTakesAtMostItsBoundFromAMemberAndSaysSo() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        try TransferPair.eventually("bob has joined") { (try? pair.bob.index.folders().count) == 1 }
        // Bob keeps 1,500 versions of the folder (1,000 pages of 200 would be 300,000).
        let count = HistoryResult.limit + 500
        try pair.bob.index.addVersions((1...count).map { n in
            VersionRecord(folderID: shared.folder, path: "old/file\(n).txt", version: [pair.bob.deviceKey: UInt64(n)], size: 10,
                          mtimeNs: 0, mode: 0o644, modifiedBy: pair.bob.deviceKey, keptAt: Int64(n), reason: "peer-edit",
                          rootHash: [UInt8](repeating: UInt8(n % 256), count: 32), held: true,
                          chunks: [FileChunkRecord(offset: 0, size: 10, hash: [UInt8](repeating: 1, count: 32))])
        })
        let folder = try #require(pair.alice.folders.queue.sync { pair.alice.folders.state.withLock { $0.folders[shared.folder] } })
        let found = try pair.alice.folders.knownVersions(folder: folder, relative: "")
        #expect(found.asked == 1 && found.answered == 1)
        #expect(found.versions.count == HistoryResult.limit && found.truncated, "\(found.versions.count), truncated: \(found.truncated)")
        #expect(Set(found.versions.map(\.entry.id)).count == HistoryResult.limit)
        // The newest first: what was cut is the oldest.
        #expect(found.versions.map(\.entry.keptAt).min() == Int64(count - HistoryResult.limit + 1))
    }

    /// `history` runs on the caller's thread (the node's queue delivers the members'
    /// answers), but the connected members it asks are the connections' sessions, which
    /// the node's queue changes: it reads them there. (It read them on the caller's thread,
    /// racing a session that connects or ends.)
    @Test func historyReadsTheSessionsOnTheNodesQueue() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try Data("one".utf8).write(to: URL(fileURLWithPath: docs + "/a.txt"))
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        // Bob's folder has synced (and so serves its versions).
        try TransferPair.eventually("bob has a.txt") { ((try? pair.bob.index.file(folderID: shared.folder, path: "a.txt")) ?? nil) != nil }
        let before = pair.alice.link.offQueueCalls.withLock { $0 }
        let history = try pair.alice.folders.history(path: docs, localName: "alice")
        #expect(history.peersAsked == 1 && history.peersAnswered == 1)
        #expect(pair.alice.link.offQueueCalls.withLock { $0 } == before, "the sessions were read off the node's queue")
    }
}
