import Foundation
import Glibc
import PeerFiles
@testable import PeerIndex
@testable import SyncEngine
import Synchronization
import Testing

/// Issue 42.2: a damaged index or a failing disk gives the user the real cause. Each
/// command here used to turn the failed read into an empty answer and a wrong message
/// (`unshare`: "not shared", `accept`: "no share offer", `status`: zero counts, `cancel`:
/// "not found", `offers`, `conflicts`, `transfers`: empty lists); now it answers with the
/// index's error. A removal of partial data on
/// cancel that fails is reported and tried again.
@Suite struct IndexFailureTests {
    /// Damages `index` under the running service: `table` is no longer where it was (as a
    /// corrupt page or a half-restored backup leaves it), so every read of it fails.
    static func damage(_ index: NodeIndex, table: String) throws {
        try index.write { db in try db.execute("ALTER TABLE \(table) RENAME TO \(table)_damaged") }
    }

    /// The index's error as the control reply carries it: kind `index`, its SQLite cause.
    static func expectIndexError(_ body: () throws(EngineError) -> Void, table: String) {
        do throws(EngineError) {
            try body()
            Issue.record("no error")
        } catch {
            #expect(error.kind == .index, "\(error.kind): \(error)")
            #expect(error.description.contains("no such table: \(table)"), "\(error)")
        }
    }

    /// A pair where alice shares `docs` with bob (who does not answer yet).
    static func shared(_ pair: TransferPair) throws -> (docs: String, folder: String) {
        let docs = pair.alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "x".write(toFile: docs + "/a.txt", atomically: false, encoding: .utf8)
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        return (docs, shared.folder)
    }

    @Test func unshareOfAFolderTheIndexCannotReadSaysWhyNotNotShared() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let (docs, _) = try Self.shared(pair)
        try Self.damage(pair.alice.index, table: "folders")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.unshare(directory: docs) }, table: "folders")
    }

    /// A daemon whose folders cannot be read says so, rather than running with none.
    @Test func startingWithFoldersTheIndexCannotReadIsReported() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        _ = try Self.shared(pair)
        pair.alice.folders.stopFolders()
        try Self.damage(pair.alice.index, table: "folders")
        pair.alice.queue.sync { pair.alice.folders.startFolders() }
        let report = try #require(pair.alice.events.errors.first { $0.contains("cannot read the shared folders") },
                                  "\(pair.alice.events.errors)")
        #expect(report.contains("no such table: folders"), "\(report)")
    }

    @Test func statusOfAFolderWhoseFilesCannotBeCountedFailsInsteadOfShowingZero() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        _ = try Self.shared(pair)
        try TransferPair.eventually("alice's scan counts a.txt") {
            (try? pair.alice.folders.folderStatus(.everything).items.first?.files) == 1
        }
        try Self.damage(pair.alice.index, table: "files")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.folderStatus(.everything) }, table: "files")
        // `conflicts` read the same table: not "no conflicts".
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.conflicts(.everything, localName: "alice") },
                              table: "files")
    }

    @Test func acceptWhenTheOffersCannotBeReadSaysWhyNotNoSuchOffer() throws {
        let pair = try TransferPair(configureBob: { $0.autoAccept = false })
        defer { pair.cleanup() }
        pair.connect()
        let (_, folder) = try Self.shared(pair)
        try TransferPair.eventually("bob holds alice's offer") { (try? pair.bob.index.folderOffers().count) == 1 }
        try Self.damage(pair.bob.index, table: "folder_offers")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.bob.folders.answerShare(folder, accept: true, into: nil) },
                              table: "folder_offers")
        // The offers `status` and `offers` list: not an empty list.
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.bob.folders.shareOffers(.everything) }, table: "folder_offers")
    }

    /// `history` listed the members' versions only, `restore` said "no version of … on this
    /// node", when our versions could not be read.
    @Test func historyAndRestoreWhenTheVersionsCannotBeReadSayWhy() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let (docs, _) = try Self.shared(pair)
        pair.alice.folders.versions = VersionKeeper(versionsDirectory: pair.alice.directory + "/versions", index: pair.alice.index)
        try Self.damage(pair.alice.index, table: "versions")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.history(path: docs, localName: "alice") },
                              table: "versions")
        Self.expectIndexError({ () throws(EngineError) in
            _ = try pair.alice.folders.restore(path: docs + "/a.txt", at: nil, version: nil, to: nil)
        }, table: "versions")
    }

    /// With a role set, `changes` listed nothing and `revert` reverted 0 paths when the
    /// peers' entries could not be read; `select` said nothing was needed (0 files).
    @Test func changesRevertAndSelectWhenThePeersEntriesCannotBeReadSayWhy() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let (docs, folder) = try Self.shared(pair)
        try pair.alice.folders.setRole(folderID: folder, devices: [pair.bob.deviceKey], role: .receiveOnly,
                                       noDeletes: nil)
        try Self.damage(pair.alice.index, table: "remote_files")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.roleChanges(directory: docs, page: .everything) },
                              table: "remote_files")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.revertFolder(directory: docs) }, table: "remote_files")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.select(directory: docs, paths: nil) },
                              table: "remote_files")
    }

    /// `override` answered "0 overridden" when the members' roles could not be read.
    @Test func overrideWhenTheRolesCannotBeReadSaysWhy() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let (docs, _) = try Self.shared(pair)
        try Self.damage(pair.alice.index, table: "folder_peers")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.overrideFolder(directory: docs) }, table: "folder_peers")
    }

    /// An offer for a folder we share already was listed as a new folder (no `joins`) when
    /// our folders could not be read.
    @Test func offersWhenOurFoldersCannotBeReadSayWhy() throws {
        let pair = try TransferPair(configureBob: { $0.autoAccept = false })
        defer { pair.cleanup() }
        pair.connect()
        _ = try Self.shared(pair)
        try TransferPair.eventually("bob holds alice's offer") { (try? pair.bob.index.folderOffers().count) == 1 }
        try Self.damage(pair.bob.index, table: "folders")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.bob.folders.shareOffers(.everything) }, table: "folders")
    }

    /// `tree` showed every name as selected ("all") when the selection could not be read.
    @Test func treeWhenTheSelectionCannotBeReadSaysWhy() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let (docs, _) = try Self.shared(pair)
        try Self.damage(pair.alice.index, table: "folder_selection")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.alice.folders.tree(directory: docs, path: nil, page: .everything) },
                              table: "folder_selection")
    }

    /// An unfinished receive recorded by bob's index (as a restart leaves it), with its
    /// partial file staged in bob's receive folder.
    static func recordedReceive(_ pair: TransferPair, id: String) throws -> String {
        let staging = pair.bob.directory + "/" + PartialFile.stagingDirectoryName
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        let partial = staging + "/" + id + PartialFile.fileExtension
        try Data(repeating: 7, count: 1000).write(to: URL(fileURLWithPath: partial))
        try pair.bob.index.insertTransfer(TransferRecord(id: id, direction: .receive, deviceID: pair.alice.deviceKey, name: "big.bin",
                                                         size: 4000, mode: 0o644, mtimeNs: 0, rootHash: [UInt8](repeating: 1, count: 32),
                                                         chunkCount: 0, state: .paused, partialPath: pair.bob.directory, createdAt: 1),
                                          chunks: [])
        return partial
    }

    @Test func cancelWhenTheTransfersCannotBeReadSaysWhyNotNotFound() throws {
        let store = try FailingStore()
        let pair = try TransferPair(bobStore: store)
        defer { pair.cleanup() }
        let id = "0123456789abcdef0123456789abcdef"
        let partial = try Self.recordedReceive(pair, id: id)
        store.failing.withLock { $0 = ["transfers"] }
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.bob.service.cancelTransfer(String(id.prefix(8))) },
                              table: "transfers")
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.bob.service.resumeTransfers(String(id.prefix(8))) },
                              table: "transfers")
        // `transfers` lists the recorded ones: not an empty history.
        Self.expectIndexError({ () throws(EngineError) in _ = try pair.bob.service.transferList(.everything) }, table: "transfers")
        // Nothing was cancelled on a read that failed: the partial data is still there.
        #expect(FileManager.default.fileExists(atPath: partial))
        store.failing.withLock { $0 = [] }
        #expect(try pair.bob.service.cancelTransfer(String(id.prefix(8))).state == .cancelled)
        try TransferPair.eventually("the partial file is removed") { !FileManager.default.fileExists(atPath: partial) }
    }

    /// The staging directory refuses the removal (immutable, as root; read-only otherwise):
    /// the cancel still succeeds, the failure is an error event naming the file and the
    /// cause, and once the directory allows it the next try removes the partial file.
    @Test func aPartialFileThatCannotBeRemovedOnCancelIsReportedAndRetried() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        pair.bob.queue.sync { pair.bob.service.cleanupRetry = .milliseconds(200) }
        let id = "fedcba9876543210fedcba9876543210"
        let partial = try Self.recordedReceive(pair, id: id)
        let staging = (partial as NSString).deletingLastPathComponent
        try Self.protect(staging, true)
        defer { try? Self.protect(staging, false) }
        #expect(try pair.bob.service.cancelTransfer(id).state == .cancelled)
        try TransferPair.eventually("the failed removal is reported") {
            pair.bob.events.errors.contains { $0.contains("cannot remove the partial data of big.bin") }
        }
        let report = try #require(pair.bob.events.errors.first { $0.contains("cannot remove") })
        #expect(report.contains(partial) && report.contains("trying again"), "\(report)")
        #expect(FileManager.default.fileExists(atPath: partial))
        try Self.protect(staging, false)
        try TransferPair.eventually("a retry removes it") { !FileManager.default.fileExists(atPath: partial) }
    }

    /// Expiry removes the chunk files no version uses; one whose removal failed was dropped
    /// without a word and stayed for ever (the index no longer named it). Now it is said,
    /// and the next expiry removes it.
    @Test func aChunkFileExpiryCannotRemoveIsReportedAndRemovedNextTime() throws {
        let home = NSTemporaryDirectory() + "versions-cleanup-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let index = try NodeIndex.inMemory()
        _ = try index.addFolder(id: "f", path: home + "/folder")
        let clock = Mutex<Int64>(1_000)
        let reports = Mutex<[String]>([])
        let keeper = VersionKeeper(versionsDirectory: home + "/versions", index: index, clock: { clock.withLock { $0 } },
                                   report: { message in reports.withLock { $0.append(message) } })
        try keeper.setPolicy(VersionPolicy(parsing: "simple 1")!, folderID: "f")
        var ids: [Int64] = []
        for n in 0..<2 {
            let file = home + "/v\(n)"
            try Data((0..<1000).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: file))
            let record = FileRecord(folderID: "f", path: "a.bin", sequence: 1, kind: .file, size: 1000, mtimeNs: Int64(n), mode: 0o644,
                                    version: ["A": UInt64(n + 1)], rootHash: [UInt8](repeating: 0, count: 32), modifiedBy: "A")
            ids.append(try #require(keeper.keepFile(at: file, as: record, reason: "peer-edit")))
            clock.withLock { $0 += 1_000 }
        }
        let oldest = try #require(try index.version(folderID: "f", id: ids[0])?.chunks.first)
        let hash = try #require(ChunkHash(bytes: oldest.hash))
        let directory = (keeper.store.path(of: hash) as NSString).deletingLastPathComponent
        try Self.protect(directory, true)
        defer { try? Self.protect(directory, false) }
        #expect(keeper.expire(folderID: "f", now: clock.withLock { $0 }, fileSystemBytes: 1 << 40) == 1)
        #expect(keeper.store.has(hash))
        let report = try #require(reports.withLock { $0 }.first, "nothing said")
        #expect(report.contains("cannot remove 1 chunk file") && report.contains(keeper.store.path(of: hash))
                && report.contains("trying again"), "\(report)")
        try Self.protect(directory, false)
        #expect(keeper.expire(folderID: "f", now: clock.withLock { $0 }, fileSystemBytes: 1 << 40) == 0)
        #expect(!keeper.store.has(hash), "the next expiry did not remove it")
    }

    /// Makes `directory` refuse (or allow again) removing what it holds.
    static func protect(_ directory: String, _ on: Bool) throws {
        if getuid() == 0 {
            let chattr = Process()
            chattr.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
            chattr.arguments = [on ? "+i" : "-i", directory]
            try chattr.run()
            chattr.waitUntilExit()
            try #require(chattr.terminationStatus == 0, "chattr \(on ? "+i" : "-i") \(directory)")
        } else {
            try #require(chmod(directory, on ? 0o500 : 0o700) == 0)
        }
    }
}
