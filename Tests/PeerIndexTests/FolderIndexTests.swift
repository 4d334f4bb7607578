import PeerModel
import Foundation
@testable import PeerIndex
import Synchronization
import Testing

/// A clock tests can move.
final class SettableClock: Sendable {
    private let value: Mutex<Int64>
    init(_ start: Int64) { value = Mutex(start) }
    func set(_ now: Int64) { value.withLock { $0 = now } }
    var now: Int64 { value.withLock { $0 } }
}

/// `count` bytes that differ for every `n` (unlike `key`, which repeats every 256 values):
/// `n` big-endian, then a filler.
func hash32(_ n: Int, count: Int = 32) -> [UInt8] {
    let head = (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: Int64(n)) >> (56 - 8 * UInt64($0))) }
    return Array((head + (0..<max(0, count - 8)).map { UInt8(truncatingIfNeeded: 0xA5 &+ $0) }).prefix(count))
}

/// A file record with `chunkCount` chunks of 1,000 bytes whose hashes derive from `seed`.
func sampleFile(_ folderID: String, _ path: String, chunkCount: Int = 2, seed: Int = 0, by device: Int = 1,
                counter: UInt64 = 1) -> FileRecord {
    let chunks = (0..<chunkCount).map { FileChunkRecord(offset: Int64($0) * 1_000, size: 1_000, hash: hash32(seed * 1_000 + $0)) }
    return FileRecord(folderID: folderID, FileEntry(path: path, kind: .file, size: Int64(chunkCount) * 1_000, mtimeNs: 1_700_000_000_123_456_789, mode: 0o644, version: [deviceID(device): counter], rootHash: hash32(500 + seed), modifiedBy: deviceID(device)), inode: UInt64(10_000 + seed), chunks: chunks)
}

func sampleRemote(_ path: String, sequence: Int64, device: Int = 2, deleted: Bool = false) -> RemoteFileRecord {
    RemoteFileRecord(FileEntry(path: path, kind: .file, size: deleted ? 0 : 2_000, mtimeNs: 1_700_000_000_000_000_000 + sequence, mode: 0o640, deleted: deleted, version: [deviceID(device): UInt64(sequence), deviceID(1): 3], rootHash: deleted ? nil : hash32(700 + Int(sequence)), modifiedBy: deviceID(device), sequence: sequence), manifest: deleted ? nil : Array("SPM1".utf8) + hash32(Int(sequence), count: 44))
}

@Suite struct FolderIndexTests {
    /// An index with peers 1, 2, 3 and folders "docs" (shared with 2 and 3) and "pics".
    func populatedIndex() throws -> NodeIndex {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        for n in 1...3 { try index.upsertPeer(samplePeer(n)) }
        try index.addFolder(id: "docs", path: "/home/u/Documents", label: "Documents")
        try index.addFolder(id: "pics", path: "/home/u/Pictures")
        try index.addFolderPeer(folderID: "docs", deviceID: deviceID(2))
        try index.addFolderPeer(folderID: "docs", deviceID: deviceID(3))
        return index
    }

    // MARK: Folders

    @Test func foldersRoundTripAndAreFoundByIDAndPath() throws {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        let added = try index.addFolder(id: "docs", path: "/home/u/Documents", label: "Documents")
        #expect(added.createdAt == fixedClock())
        #expect(added.indexID > 0)
        #expect(added.maxSequence == 0 && !added.paused && added.error == nil)
        #expect(try index.folder(id: "docs") == added)
        #expect(try index.folder(path: "/home/u/Documents") == added)
        #expect(try index.folder(id: "nope") == nil)
        let other = try index.addFolder(id: "a-music", path: "/home/u/Music")
        #expect(other.indexID != added.indexID)
        #expect(try index.folders().map(\.id) == ["docs", "a-music"], "by path")

        let sameID = #expect(throws: IndexError.self) { try index.addFolder(id: "docs", path: "/elsewhere") }
        #expect(sameID?.resultCode == 1555) // SQLITE_CONSTRAINT_PRIMARYKEY
        let samePath = #expect(throws: IndexError.self) { try index.addFolder(id: "x", path: "/home/u/Music") }
        #expect(samePath?.resultCode == 2067) // SQLITE_CONSTRAINT_UNIQUE

        try index.setFolderPaused(id: "docs", true)
        try index.setFolderError(id: "docs", "folder root /home/u/Documents is missing")
        var stored = try #require(try index.folder(id: "docs"))
        #expect(stored.paused && stored.error == "folder root /home/u/Documents is missing" && stored.errorAt == fixedClock())
        try index.setFolderError(id: "docs", nil)
        try index.setFolderPaused(id: "docs", false)
        stored = try #require(try index.folder(id: "docs"))
        #expect(!stored.paused && stored.error == nil && stored.errorAt == nil)

        #expect(throws: IndexError.self) { try index.setFolderPaused(id: "nope", true) }
        #expect(throws: IndexError.self) { try index.maxSequence(folderID: "nope") }
        #expect(try index.removeFolder(id: "docs"))
        #expect(try !index.removeFolder(id: "docs"))
        #expect(try index.folders().map(\.id) == ["a-music"])
    }

    @Test func folderPeersTrackSequencesAndIndexIDs() throws {
        let index = try populatedIndex()
        try index.addFolderPeer(folderID: "docs", deviceID: deviceID(2)) // idempotent
        #expect(try index.folderPeers(folderID: "docs").map(\.deviceID) == [deviceID(2), deviceID(3)].sorted())
        #expect(try index.folderIDs(sharedWith: deviceID(2)) == ["docs"])
        #expect(try index.folderIDs(sharedWith: deviceID(1)).isEmpty, "a peer only learns folders shared with it")

        try index.setAckedSequence(folderID: "docs", deviceID: deviceID(2), 41)
        try index.setReceivedSequence(folderID: "docs", deviceID: deviceID(2), 17)
        try index.addFolderPeer(folderID: "docs", deviceID: deviceID(2))
        #expect(try index.folderPeer(folderID: "docs", deviceID: deviceID(2))
                == FolderPeerRecord(folderID: "docs", deviceID: deviceID(2), ackedSequence: 41, receivedSequence: 17))
        let notShared = #expect(throws: IndexError.self) { try index.setAckedSequence(folderID: "pics", deviceID: deviceID(2), 1) }
        #expect(notShared?.kind == .notFound)
        let unknownPeer = #expect(throws: IndexError.self) { try index.addFolderPeer(folderID: "pics", deviceID: deviceID(9)) }
        #expect(unknownPeer?.resultCode == 787)

        // First exchange: index ID 0 → 77 resets (nothing to drop yet); the same ID again does not.
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2), [sampleRemote("a", sequence: 17)])
        #expect(try index.noteRemoteIndexID(folderID: "docs", deviceID: deviceID(2), indexID: 77))
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2), [sampleRemote("a", sequence: 5)], receivedSequence: 5)
        #expect(try !index.noteRemoteIndexID(folderID: "docs", deviceID: deviceID(2), indexID: 77))
        #expect(try index.folderPeer(folderID: "docs", deviceID: deviceID(2))?.receivedSequence == 5)
        // The peer's index was reset: another ID drops its entries and the received sequence.
        #expect(try index.noteRemoteIndexID(folderID: "docs", deviceID: deviceID(2), indexID: 78))
        #expect(try index.remoteFiles(folderID: "docs", deviceID: deviceID(2)).isEmpty)
        #expect(try index.folderPeer(folderID: "docs", deviceID: deviceID(2))
                == FolderPeerRecord(folderID: "docs", deviceID: deviceID(2), ackedSequence: 41, receivedSequence: 0, remoteIndexID: 78))

        #expect(try index.removeFolderPeer(folderID: "docs", deviceID: deviceID(3)))
        #expect(try !index.removeFolderPeer(folderID: "docs", deviceID: deviceID(3)))
        #expect(try index.folderPeer(folderID: "docs", deviceID: deviceID(3)) == nil)
    }

    @Test func offersAreRefreshedListedAndRemoved() throws {
        let clock = SettableClock(1_000)
        let index = try NodeIndex.inMemory(clock: { clock.now })
        for n in 1...2 { try index.upsertPeer(samplePeer(n)) }
        try index.recordFolderOffer(folderID: "photos", deviceID: deviceID(1), label: "Photos")
        clock.set(2_000)
        try index.recordFolderOffer(folderID: "photos", deviceID: deviceID(2), label: "Pics")
        try index.recordFolderOffer(folderID: "notes", deviceID: deviceID(2), label: "Notes")
        clock.set(3_000)
        try index.recordFolderOffer(folderID: "photos", deviceID: deviceID(1), label: "Photos 2")
        #expect(try index.folderOffers() == [
            FolderOffer(folderID: "notes", deviceID: deviceID(2), label: "Notes", offeredAt: 2_000),
            FolderOffer(folderID: "photos", deviceID: deviceID(2), label: "Pics", offeredAt: 2_000),
            FolderOffer(folderID: "photos", deviceID: deviceID(1), label: "Photos 2", offeredAt: 3_000),
        ])
        #expect(try index.folderOffers(folderID: "photos").count == 2)
        #expect(throws: IndexError.self) { try index.recordFolderOffer(folderID: "x", deviceID: deviceID(7), label: "") }
        #expect(throws: IndexError.self) { try index.recordFolderOffer(folderID: "", deviceID: deviceID(1), label: "") }
        #expect(try index.removeFolderOffers(folderID: "photos", deviceID: deviceID(2)) == 1)
        #expect(try index.deletePeer(deviceID: deviceID(2)))
        #expect(try index.folderOffers().map(\.folderID) == ["photos"], "forgetting a peer drops its offers")
        #expect(try index.removeFolderOffers(folderID: "photos") == 1)
        #expect(try index.folderOffers().isEmpty)
    }

    /// Accepting an offer is one transaction: the folder, its peers and the end of the
    /// offers all at once, or nothing (a daemon killed between separate writes left a folder
    /// that no peer shared, which never synced).
    @Test func anAcceptedFolderIsRecordedWithItsPeersAllOrNothing() throws {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        for n in 1...3 { try index.upsertPeer(samplePeer(n)) }
        for n in 2...3 { try index.recordFolderOffer(folderID: "photos", deviceID: deviceID(n), label: "Photos") }
        // An unknown peer among them (a failure half-way): no folder, no peer, the offers stay.
        let failed = #expect(throws: IndexError.self) {
            try index.addFolder(id: "photos", path: "/r/Photos", label: "Photos", sharedWith: [deviceID(2), deviceID(9)],
                                removingOffers: true)
        }
        #expect(failed?.resultCode == 787)
        #expect(try index.folder(id: "photos") == nil)
        #expect(try index.folderIDs(sharedWith: deviceID(2)).isEmpty)
        #expect(try index.folderOffers(folderID: "photos").count == 2)

        let added = try index.addFolder(id: "photos", path: "/r/Photos", label: "Photos", sharedWith: [deviceID(3), deviceID(2)],
                                        removingOffers: true)
        #expect(try index.folder(id: "photos") == added)
        #expect(try index.folderPeers(folderID: "photos").map(\.deviceID) == [deviceID(2), deviceID(3)].sorted())
        #expect(try index.folderOffers().isEmpty)

        // Joining an existing folder: the same, for the peers alone.
        try index.recordFolderOffer(folderID: "photos", deviceID: deviceID(1), label: "Photos")
        #expect(throws: IndexError.self) {
            try index.addFolderPeers(folderID: "photos", deviceIDs: [deviceID(1), deviceID(9)], removingOffers: true)
        }
        #expect(try index.folderPeer(folderID: "photos", deviceID: deviceID(1)) == nil)
        #expect(try index.folderOffers(folderID: "photos").count == 1)
        try index.addFolderPeers(folderID: "photos", deviceIDs: [deviceID(1), deviceID(2)], removingOffers: true)
        #expect(try index.folderPeers(folderID: "photos").count == 3)
        #expect(try index.folderOffers().isEmpty)
        // Without removingOffers, offers stay (sharing a folder of our own).
        try index.recordFolderOffer(folderID: "photos", deviceID: deviceID(1), label: "Photos")
        try index.addFolderPeers(folderID: "photos", deviceIDs: [deviceID(1)])
        #expect(try index.folderOffers().count == 1)
    }

    // MARK: Local files

    @Test func filesOfEveryKindRoundTrip() throws {
        let index = try populatedIndex()
        let me = deviceID(1)
        let records = [
            sampleFile("docs", "report.pdf", chunkCount: 3, seed: 1),
            FileRecord(folderID: "docs", FileEntry(path: "empty.txt", kind: .file, mtimeNs: -5, mode: 0o600, version: [me: 1], rootHash: hash32(9), modifiedBy: me)),
            FileRecord(folderID: "docs", FileEntry(path: "sub", kind: .directory, mtimeNs: 7, mode: 0o755, version: [me: 2, deviceID(2): 5], modifiedBy: deviceID(2)), inode: UInt64.max),
            FileRecord(folderID: "docs", FileEntry(path: "sub/link", kind: .symlink, mtimeNs: 8, mode: 0o777, symlinkTarget: "../report.pdf", version: [me: 1], modifiedBy: me)),
            FileRecord(folderID: "docs", FileEntry(path: "gone.txt", kind: .file, mtimeNs: 9, mode: 0o644, deleted: true, version: [me: 4, deviceID(3): 2], modifiedBy: me)),
            FileRecord(folderID: "docs", FileEntry(path: "ünïcode/日本語 \"quoted\".txt", kind: .file, mtimeNs: 10, mode: 0o644, version: ["weird \"key\"\n\\": 3], modifiedBy: me)),
        ]
        let stored = try index.upsertFiles(records)
        #expect(stored.map(\.sequence) == [1, 2, 3, 4, 5, 6])
        for record in stored {
            #expect(try index.file(folderID: "docs", path: record.path) == record)
        }
        #expect(try index.files(folderID: "docs") == stored.sorted { $0.path < $1.path })
        #expect(try index.files(folderID: "docs", includeChunks: false).allSatisfy { $0.chunks.isEmpty })
        #expect(try index.file(folderID: "docs", path: "missing") == nil)
        #expect(try index.file(folderID: "pics", path: "report.pdf") == nil)
        #expect(try index.fileCount(folderID: "docs") == 6)
        #expect(try index.maxSequence(folderID: "docs") == 6)

        // Replacing a file replaces its chunk list.
        var edited = sampleFile("docs", "report.pdf", chunkCount: 1, seed: 2, counter: 2)
        edited.mode = 0o600
        let again = try index.upsertFiles([edited])
        #expect(again[0].sequence == 7)
        #expect(try index.file(folderID: "docs", path: "report.pdf") == again[0])
        #expect(try index.fileCount(folderID: "docs") == 6)
        #expect(try index.files(rootHash: hash32(502)).map(\.path) == ["report.pdf"])
        #expect(try index.files(rootHash: hash32(501)).isEmpty)
    }

    @Test func sequencesAreMonotonicPerFolderAndNeverReused() throws {
        let index = try populatedIndex()
        // One batch across two folders: each folder counts on its own.
        let batch = (0..<6).map { sampleFile($0 % 2 == 0 ? "docs" : "pics", "f\($0)", chunkCount: 1, seed: $0) }
        let stored = try index.upsertFiles(batch)
        #expect(stored.map(\.sequence) == [1, 1, 2, 2, 3, 3])
        #expect(try index.maxSequence(folderID: "docs") == 3)
        #expect(try index.maxSequence(folderID: "pics") == 3)

        // Changing an existing path gives it a new, higher number.
        var seen = Set(stored.filter { $0.folderID == "docs" }.map(\.sequence))
        var last: Int64 = 3
        for round in 0..<5 {
            let path = "f\([0, 2, 4][round % 3])"
            let next = try index.upsertFiles([sampleFile("docs", path, chunkCount: 1, seed: 10 + round)])[0].sequence
            #expect(next > last && !seen.contains(next))
            seen.insert(next)
            last = next
        }
        // Removing the row with the highest number must not give that number again.
        let top = try #require(try index.files(folderID: "docs", since: 0, limit: 100).last)
        #expect(top.sequence == last)
        #expect(try index.removeFiles(folderID: "docs", paths: [top.path, "not-there"]) == 1)
        let afterRemoval = try index.upsertFiles([sampleFile("docs", "new", chunkCount: 1, seed: 99)])[0].sequence
        #expect(afterRemoval == last + 1)
        // The same path twice in one batch: the later record wins, both numbers are used.
        let twice = try index.upsertFiles([sampleFile("docs", "dup", seed: 1), sampleFile("docs", "dup", seed: 2)])
        #expect(twice.map(\.sequence) == [last + 2, last + 3])
        #expect(try index.file(folderID: "docs", path: "dup")?.rootHash == hash32(502))
        // Other folder untouched.
        #expect(try index.maxSequence(folderID: "pics") == 3)
        // files(since:) returns strictly increasing sequences above `since`.
        let since = try index.files(folderID: "docs", since: 4, limit: 100).map(\.sequence)
        #expect(since == since.sorted() && since.allSatisfy { $0 > 4 } && Set(since).count == since.count)
    }

    @Test func pagingByPathAndBySequence() throws {
        let index = try populatedIndex()
        let paths = (0..<250).map { String(format: "dir%02d/file%03d", $0 % 7, $0) }
        try index.upsertFiles(paths.map { sampleFile("docs", $0, chunkCount: 1, seed: 1) })
        var collected: [String] = []
        var after: String? = nil
        while true {
            let page = try index.files(folderID: "docs", afterPath: after, limit: 40)
            if page.isEmpty { break }
            #expect(page.count <= 40)
            collected += page.map(\.path)
            after = page.last?.path
        }
        #expect(collected == paths.sorted())

        var sequences: [Int64] = []
        var since: Int64 = 0
        while case let page = try index.files(folderID: "docs", since: since, limit: 64, includeChunks: false), !page.isEmpty {
            sequences += page.map(\.sequence)
            since = page.last!.sequence
        }
        #expect(sequences == Array(1...250))
        #expect(try index.files(folderID: "docs", since: 250, limit: 10).isEmpty)
    }

    @Test func chunksAreFoundByHashInLiveFilesOfAnyFolder() throws {
        let index = try populatedIndex()
        var shared = sampleFile("pics", "copy.bin", chunkCount: 3, seed: 5)
        shared.chunks[2].hash = hash32(42)
        try index.upsertFiles([sampleFile("docs", "a.bin", chunkCount: 3, seed: 5), shared,
                               sampleFile("docs", "b.bin", chunkCount: 2, seed: 6)])
        #expect(Set(try index.localChunkLocations(hash: hash32(5_001))) == [
            ChunkLocation(folderID: "docs", path: "a.bin", offset: 1_000, size: 1_000),
            ChunkLocation(folderID: "pics", path: "copy.bin", offset: 1_000, size: 1_000),
        ])
        #expect(try index.localChunkLocations(hash: hash32(5_001), limit: 1).count == 1)
        #expect(try index.localChunkLocations(hash: hash32(42)) == [ChunkLocation(folderID: "pics", path: "copy.bin", offset: 2_000, size: 1_000)])
        #expect(try index.localChunkLocations(hash: hash32(12_345)).isEmpty)

        // A file that is replaced or deleted no longer offers its old chunks.
        try index.upsertFiles([sampleFile("docs", "a.bin", chunkCount: 1, seed: 8),
                               FileRecord(folderID: "pics", FileEntry(path: "copy.bin", kind: .file, mtimeNs: 1, mode: 0o644, deleted: true, version: [deviceID(1): 9], modifiedBy: deviceID(1)), chunks: shared.chunks)])
        #expect(try index.localChunkLocations(hash: hash32(5_001)).isEmpty)
        #expect(try index.localChunkLocations(hash: hash32(8_000)).map(\.path) == ["a.bin"])
    }

    /// Many hashes at once, most of them absent (a pull of new files): each present one is
    /// found wherever it falls in the groups asked for together (`presentHashes`, in the order
    /// given), and only those; a hash only a deleted file had is no location.
    @Test func manyChunksAreLookedUpAtOnce() throws {
        let index = try populatedIndex()
        try index.upsertFiles((0..<5).map { sampleFile("docs", "f\($0).bin", chunkCount: 1, seed: 100 + $0) })
        let present = (0..<5).map { hash32((100 + $0) * 1_000) }
        #expect(try index.localChunkLocations(hash: present[0]).map(\.path) == ["f0.bin"], "the hashes sampleFile gives")
        try index.upsertFiles([FileRecord(folderID: "docs", FileEntry(path: "f4.bin", kind: .file, mtimeNs: 1, mode: 0o644, deleted: true, version: [deviceID(1): 9], modifiedBy: deviceID(1)), chunks: [FileChunkRecord(offset: 0, size: 1_000, hash: present[4])])])
        let absent = (0..<300).map { hash32(900_000 + $0) }
        let per = NodeIndex.hashesPerQuery
        for count in [1, per - 1, per, per + 1, 2 * per, 300] {
            var asked = Array(absent.prefix(count))
            for (n, hash) in present.enumerated() { asked.insert(hash, at: min(asked.count, [0, per - 1, per, 2 * per - 1, 200][n])) }
            var found: [[UInt8]] = []
            try withRawDatabase(index) { (db: Database) throws in found = try NodeIndex.presentHashes(asked, db) }
            #expect(Set(found) == Set(present), "\(count) absent hashes around the present ones (a deleted file's chunk row too)")
            #expect(found.count == present.count)
            let located = try index.localChunkLocations(hashes: asked)
            #expect(Set(located.keys) == Set(present.prefix(4)), "the deleted file's chunk is no location")
            #expect(located[present[3]]?.map(\.path) == ["f3.bin"])
        }
        #expect(try index.localChunkLocations(hashes: absent).isEmpty)
        #expect(try index.localChunkLocations(hashes: [[UInt8]]()).isEmpty)
    }

    /// The counts behind a peer's index quota: its rows (all, or up to a limit) and how many
    /// of a page's paths it has already.
    @Test func aPeersRowsAreCountedWholeOrUpToALimit() throws {
        let index = try populatedIndex()
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2), (1...30).map { sampleRemote("r\($0)", sequence: Int64($0)) })
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(3), [sampleRemote("other", sequence: 1, device: 3)])
        #expect(try index.remoteFileCount(folderID: "docs", deviceID: deviceID(2), upTo: 100) == 30)
        #expect(try index.remoteFileCount(folderID: "docs", deviceID: deviceID(2), upTo: 30) == 30)
        #expect(try index.remoteFileCount(folderID: "docs", deviceID: deviceID(2), upTo: 7) == 7)
        #expect(try index.remoteFileCount(folderID: "docs", deviceID: deviceID(3), upTo: 100) == 1)
        #expect(try index.remoteFileCount(folderID: "pics", deviceID: deviceID(2), upTo: 100) == 0)
        let counts = try index.remoteFileCounts(folderID: "docs", deviceID: deviceID(2), paths: ["r1", "r30", "new"])
        #expect(counts.stored == 30 && counts.existing == 2)
    }

    @Test func checkConstraintsRejectTheWholeBatch() throws {
        let index = try populatedIndex()
        try index.upsertFiles([sampleFile("docs", "ok", seed: 1)])
        var badHash = sampleFile("docs", "x", seed: 2); badHash.rootHash = [1, 2, 3]
        var badSize = sampleFile("docs", "y", seed: 3); badSize.size = -1
        var badChunk = sampleFile("docs", "z", seed: 4); badChunk.chunks[1].size = 0
        var badChunkHash = sampleFile("docs", "w", seed: 5); badChunkHash.chunks[0].hash = hash32(1, count: 31)
        for bad in [badHash, badSize, badChunk, badChunkHash] {
            let error = #expect(throws: IndexError.self) { try index.upsertFiles([sampleFile("docs", "fine", seed: 6), bad]) }
            #expect(error?.resultCode == 275, "\(bad.path): SQLITE_CONSTRAINT_CHECK")
        }
        #expect(try index.files(folderID: "docs").map(\.path) == ["ok"], "failed batches leave nothing behind")
        #expect(try index.maxSequence(folderID: "docs") == 1, "and do not move the counter")
        let unknown = #expect(throws: IndexError.self) { try index.upsertFiles([sampleFile("docs", "n", seed: 7), sampleFile("nope", "a")]) }
        #expect(unknown?.kind == .notFound)
        #expect(try index.fileCount(folderID: "docs") == 1)

        // Remote entries: a manifest only on live files, paths not empty, versions are JSON objects.
        var dirWithManifest = sampleRemote("d", sequence: 1); dirWithManifest.kind = .directory
        var emptyPath = sampleRemote("", sequence: 2)
        var zeroSequence = sampleRemote("s", sequence: 0)
        var tombstoneWithManifest = sampleRemote("t", sequence: 3, deleted: true); tombstoneWithManifest.manifest = [1]
        emptyPath.mode = 0o600; zeroSequence.mode = 0o600
        for bad in [dirWithManifest, emptyPath, zeroSequence, tombstoneWithManifest] {
            let error = #expect(throws: IndexError.self) {
                try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2), [sampleRemote("fine", sequence: 9), bad])
            }
            #expect(error?.resultCode == 275)
        }
        #expect(try index.remoteFiles(folderID: "docs", deviceID: deviceID(2)).isEmpty)
        let notJSON = #expect(throws: IndexError.self) {
            try withRawDatabase(index) { (db: Database) throws in
                try db.execute("UPDATE files SET version = '[1]' WHERE path = 'ok'")
            }
        }
        #expect(notJSON?.resultCode == 275)
    }

    @Test func removingAFolderOrPeerCascades() throws {
        let index = try populatedIndex()
        try index.upsertFiles([sampleFile("docs", "a", seed: 1), sampleFile("pics", "b", seed: 2)])
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2), [sampleRemote("a", sequence: 1)])
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(3), [sampleRemote("a", sequence: 1, device: 3)])

        // Unsharing with one peer drops only that peer's index.
        try index.removeFolderPeer(folderID: "docs", deviceID: deviceID(3))
        #expect(try index.remoteFiles(folderID: "docs", deviceID: deviceID(3)).isEmpty)
        #expect(try index.remoteFiles(folderID: "docs", deviceID: deviceID(2)).count == 1)
        // Forgetting a peer drops its shares and index.
        try index.addFolderPeer(folderID: "docs", deviceID: deviceID(3))
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(3), [sampleRemote("a", sequence: 1, device: 3)])
        try index.deletePeer(deviceID: deviceID(3))
        #expect(try index.folderPeers(folderID: "docs").map(\.deviceID) == [deviceID(2)])
        #expect(try index.remoteFiles(folderID: "docs", path: "a").keys.sorted() == [deviceID(2)])

        // Removing a folder drops its files, chunks, peers and remote files, and nothing of other folders.
        #expect(try index.removeFolder(id: "docs"))
        #expect(try index.files(folderID: "docs").isEmpty)
        #expect(try index.localChunkLocations(hash: hash32(1_000)).isEmpty)
        #expect(try index.localChunkLocations(hash: hash32(2_000)).map(\.folderID) == ["pics"])
        #expect(try index.folderPeers(folderID: "docs").isEmpty)
        try withRawDatabase(index) { (db: Database) throws in
            #expect(try db.query("SELECT count(*) FROM remote_files").first?[0] == .integer(0))
            #expect(try db.query("SELECT count(*) FROM file_chunks").first?[0] == .integer(2))
        }
        #expect(try index.files(folderID: "pics").count == 1)
    }

    /// Ranges by path in byte order, tombstones left out, and a sequence ceiling: what a
    /// scan reads a subtree with while it records its own changes.
    @Test func pagesOfARangeOfPathsLiveOnlyUpToASequence() throws {
        let index = try populatedIndex()
        // Byte order puts "a b", "a.txt" and "a/…" between "a" and "a0"; "é" after ASCII.
        let paths = ["a", "a b", "a.txt", "a/x", "a/y/z", "a0", "b", "é/1"]
        try index.upsertFiles(paths.enumerated().map { sampleFile("docs", $1, chunkCount: 1, seed: $0) })
        var gone = sampleFile("docs", "a/w", chunkCount: 0, seed: 20)
        gone.deleted = true
        try index.upsertFiles([gone])
        func page(after: String?, before: String? = nil, through: String? = nil, live: Bool = false,
                  ceiling: Int64? = nil, limit: Int = 100) throws -> [String] {
            try index.files(folderID: "docs", afterPath: after, beforePath: before, throughPath: through, liveOnly: live,
                            maxSequence: ceiling, limit: limit).map(\.path)
        }
        #expect(try page(after: nil) == ["a", "a b", "a.txt", "a/w", "a/x", "a/y/z", "a0", "b", "é/1"])
        #expect(try page(after: "a/", before: "a0") == ["a/w", "a/x", "a/y/z"])
        #expect(try page(after: "a/", before: "a0", live: true) == ["a/x", "a/y/z"])
        #expect(try page(after: "a/", before: "a0", live: true, limit: 1) == ["a/x"])
        #expect(try page(after: "a/x", before: "a0", live: true, limit: 1) == ["a/y/z"])
        #expect(try page(after: "a b", through: "a/x") == ["a.txt", "a/w", "a/x"])
        #expect(try page(after: "b", live: true) == ["é/1"])
        // Records changed after the ceiling are left out, even where they sort first.
        let ceiling = try index.maxSequence(folderID: "docs")
        try index.upsertFiles([sampleFile("docs", "a/v", chunkCount: 1, seed: 30), sampleFile("docs", "a/x", chunkCount: 1, seed: 31)])
        #expect(try page(after: "a/", before: "a0", live: true, ceiling: ceiling) == ["a/y/z"])
        #expect(try page(after: "a/", before: "a0", live: true) == ["a/v", "a/x", "a/y/z"])
        let withChunks = try index.files(folderID: "docs", afterPath: "a/y", beforePath: "a0", limit: 10)
        #expect(withChunks.map(\.chunks.count) == [1])
    }

    @Test func liveTotalsAndConflictPathsAreCountedBySQLite() throws {
        let index = try populatedIndex()
        let me = deviceID(1)
        #expect(try index.liveTotals(folderID: "docs") == LiveTotals())
        var gone = sampleFile("docs", "old.sync-conflict-20240101-000000-ABCDEFG.txt", chunkCount: 0, seed: 9)
        gone.deleted = true
        try index.upsertFiles([
            sampleFile("docs", "a.txt", chunkCount: 2, seed: 1),
            sampleFile("docs", "sub/a.sync-conflict-20240101-120000-ABCDEFG.txt", chunkCount: 1, seed: 2),
            FileRecord(folderID: "docs", FileEntry(path: "sub", kind: .directory, mtimeNs: 1, mode: 0o755, version: [me: 1], modifiedBy: me)),
            FileRecord(folderID: "docs", FileEntry(path: "sub/l", kind: .symlink, size: 5, mtimeNs: 1, mode: 0o777, symlinkTarget: "a.txt", version: [me: 1], modifiedBy: me)),
            gone,
            sampleFile("pics", "x.sync-conflict-20240101-120000-ABCDEFG.jpg", chunkCount: 1, seed: 3),
        ])
        #expect(try index.liveTotals(folderID: "docs") == LiveTotals(entries: 4, files: 2, bytes: 3_005))
        #expect(try index.livePaths(folderID: "docs", matching: "*.sync-conflict-*")
                == ["sub/a.sync-conflict-20240101-120000-ABCDEFG.txt"])
        #expect(try index.livePaths(folderID: "docs", matching: "*.SYNC-CONFLICT-*").isEmpty, "GLOB is case-sensitive")
    }

    // MARK: Remote files

    @Test func remoteFilesRoundTripPageAndUpdateTheReceivedSequenceAtomically() throws {
        let index = try populatedIndex()
        let peer = deviceID(2)
        let entries = [sampleRemote("b", sequence: 3), sampleRemote("a", sequence: 1), sampleRemote("c", sequence: 2, deleted: true),
                       RemoteFileRecord(FileEntry(path: "dir", kind: .directory, mtimeNs: 1, mode: 0o755, version: [peer: 1], modifiedBy: peer, sequence: 4)),
                       RemoteFileRecord(FileEntry(path: "dir/l", kind: .symlink, mtimeNs: 1, mode: 0o777, symlinkTarget: "/etc/hosts", version: [peer: 2], modifiedBy: peer, sequence: 5))]
        try index.upsertRemoteFiles(folderID: "docs", deviceID: peer, entries, receivedSequence: 5)
        #expect(try index.folderPeer(folderID: "docs", deviceID: peer)?.receivedSequence == 5)
        #expect(try index.remoteFiles(folderID: "docs", deviceID: peer) == entries.sorted { $0.path < $1.path })
        for entry in entries {
            #expect(try index.remoteFile(folderID: "docs", deviceID: peer, path: entry.path) == entry)
        }
        #expect(try index.remoteFile(folderID: "docs", deviceID: deviceID(3), path: "a") == nil)
        #expect(try index.remoteFiles(folderID: "docs", deviceID: peer, afterPath: nil, limit: 2).map(\.path) == ["a", "b"])
        #expect(try index.remoteFiles(folderID: "docs", deviceID: peer, afterPath: "b", limit: 2).map(\.path) == ["c", "dir"])
        #expect(try index.remoteFiles(folderID: "docs", deviceID: peer, since: 2, limit: 10).map(\.sequence) == [3, 4, 5])

        // An update replaces by path; the sequence moves on.
        let newer = sampleRemote("a", sequence: 6)
        try index.upsertRemoteFiles(folderID: "docs", deviceID: peer, [newer], receivedSequence: 6)
        #expect(try index.remoteFile(folderID: "docs", deviceID: peer, path: "a") == newer)
        #expect(try index.remoteFiles(folderID: "docs", deviceID: peer).count == 5)

        // Every peer's state of one path.
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(3), [sampleRemote("a", sequence: 1, device: 3)])
        let states = try index.remoteFiles(folderID: "docs", path: "a")
        #expect(states.count == 2 && states[peer] == newer && states[deviceID(3)]?.modifiedBy == deviceID(3))

        // A folder not shared with the device: nothing is stored, sequence untouched.
        let error = #expect(throws: IndexError.self) {
            try index.upsertRemoteFiles(folderID: "pics", deviceID: peer, [sampleRemote("x", sequence: 1)], receivedSequence: 1)
        }
        #expect(error?.kind == .notFound)
        // A failing batch does not move the received sequence.
        var bad = sampleRemote("y", sequence: 7); bad.rootHash = [0]
        #expect(throws: IndexError.self) {
            try index.upsertRemoteFiles(folderID: "docs", deviceID: peer, [sampleRemote("x", sequence: 8), bad], receivedSequence: 8)
        }
        #expect(try index.folderPeer(folderID: "docs", deviceID: peer)?.receivedSequence == 6)
        #expect(try index.remoteFile(folderID: "docs", deviceID: peer, path: "x") == nil)

        #expect(try index.removeRemoteFiles(folderID: "docs", deviceID: peer) == 5)
        #expect(try index.remoteFiles(folderID: "docs", deviceID: peer).isEmpty)
        #expect(try index.remoteFiles(folderID: "docs", deviceID: deviceID(3)).count == 1)
    }

    /// Pages of every peer's entries by path, all peers of a path in the same page.
    @Test func remotePagesHoldEveryPeerOfAPath() throws {
        let index = try populatedIndex()
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2),
                                    ["a", "b", "d"].enumerated().map { sampleRemote($1, sequence: Int64($0 + 1)) })
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(3),
                                    ["b", "c", "d"].enumerated().map { sampleRemote($1, sequence: Int64($0 + 1), device: 3) })
        var pages: [[String]] = []
        var after: String?
        while case let page = try index.remoteFiles(folderID: "docs", afterPath: after, pathLimit: 2), let last = page.last {
            pages.append(page.map { "\($0.record.path)@\($0.deviceID == deviceID(2) ? 2 : 3)" })
            after = last.record.path
        }
        #expect(pages == [["a@2", "b@2", "b@3"], ["c@3", "d@2", "d@3"]])
        #expect(try index.remoteFiles(folderID: "pics", afterPath: nil, pathLimit: 10).isEmpty)
    }

    /// Out of sync: what the peer has that we lack (its tombstones of paths we never had
    /// aside) or hold with another version, and what we have that it has not reported; the
    /// same counters written differently are equal.
    @Test func comparingAPeersIndexWithOursInSQL() throws {
        let index = try populatedIndex()
        let me = deviceID(1)
        let peer = deviceID(2)
        let same = sampleRemote("same", sequence: 1)
        let zero = sampleRemote("zero", sequence: 2)
        let newer = sampleRemote("newer", sequence: 3)
        let missing = sampleRemote("missing", sequence: 4)
        let goneThere = sampleRemote("gone-there", sequence: 5, deleted: true)
        let neverHad = sampleRemote("never-had", sequence: 6, deleted: true)
        try index.upsertRemoteFiles(folderID: "docs", deviceID: peer, [same, zero, newer, missing, goneThere, neverHad])
        // A counter of 0 (an entry written by an older version: a version vector drops them).
        try index.write { db in
            try db.execute("UPDATE remote_files SET version = ? WHERE path = 'zero'",
                           [.text(VersionJSON.encode(zero.version.counters.merging([deviceID(3): 0]) { a, _ in a }))])
        }
        func local(_ remote: RemoteFileRecord, version: VersionVector) -> FileRecord {
            FileRecord(folderID: "docs", FileEntry(path: remote.path, kind: .file, size: 7, mtimeNs: 1, mode: 0o644, version: version, rootHash: hash32(1), modifiedBy: me))
        }
        try index.upsertFiles([local(same, version: same.version), local(zero, version: sampleRemote("zero", sequence: 2).version),
                               local(newer, version: [deviceID(2): 1]), local(goneThere, version: [me: 1]),
                               FileRecord(folderID: "docs", FileEntry(path: "only-here", kind: .file, mtimeNs: 1, mode: 0o644, version: [me: 1], modifiedBy: me))])
        let comparison = try index.compareRemote(folderID: "docs", deviceID: peer) { ours, theirs in
            ours.filter { $0.value != 0 } != theirs.filter { $0.value != 0 }
        }
        // newer (2,000 B) and missing (2,000 B) differ; gone-there differs but is a tombstone (0 B);
        // only-here (0 B) is ours and the peer has not reported it.
        #expect(comparison == RemoteComparison(liveEntries: 4, outOfSyncFiles: 4, outOfSyncBytes: 4_000))
        // A peer that has reported nothing yet lacks every live file we have (5 of them, 28 B).
        #expect(try index.compareRemote(folderID: "docs", deviceID: deviceID(3)) { _, _ in true }
                == RemoteComparison(liveEntries: 0, outOfSyncFiles: 5, outOfSyncBytes: 28))
        // Paths the caller leaves out (not held here) are not counted.
        #expect(try index.compareRemote(folderID: "docs", deviceID: deviceID(3), counts: { path, _ in path != "only-here" }) { _, _ in true }
                == RemoteComparison(liveEntries: 0, outOfSyncFiles: 4, outOfSyncBytes: 28))
    }

    // MARK: Scale

    @Test func hundredThousandFilesInBatchesOfTenThousand() throws {
        try withTemporaryDirectory { dir in
            let index = try NodeIndex.open(at: dir.appendingPathComponent("index.db").path, clock: fixedClock)
            try index.addFolder(id: "big", path: "/data/big")
            let me = deviceID(1)
            let start = Date()
            var last: Int64 = 0
            for batch in 0..<10 {
                let records = (0..<10_000).map { n -> FileRecord in
                    let i = batch * 10_000 + n
                    return FileRecord(folderID: "big", FileEntry(path: "d\(i % 100)/file\(i).txt", kind: .file, size: 4_096, mtimeNs: 1_700_000_000_000_000_000 + Int64(i), mode: 0o644, version: [me: 1], rootHash: hash32(i), modifiedBy: me), inode: UInt64(i), chunks: [FileChunkRecord(offset: 0, size: 4_096, hash: hash32(i &* 7))])
                }
                let stored = try index.upsertFiles(records)
                #expect(stored.first!.sequence == last + 1)
                last = stored.last!.sequence
            }
            let insertSeconds = Date().timeIntervalSince(start)
            #expect(last == 100_000)

            let rescanStart = Date()
            var changed: [FileRecord] = []
            var after: String? = nil
            var total = 0
            while case let page = try index.files(folderID: "big", afterPath: after, limit: 10_000), !page.isEmpty {
                total += page.count
                after = page.last!.path
                if changed.count < 10_000 { changed += page.prefix(10_000 - changed.count).map { var r = $0; r.version = r.version.merged(with: [me: 2]); return r } }
            }
            let readSeconds = Date().timeIntervalSince(rescanStart)
            #expect(total == 100_000)
            let updateStart = Date()
            try index.upsertFiles(changed)
            let updateSeconds = Date().timeIntervalSince(updateStart)
            #expect(try index.maxSequence(folderID: "big") == 110_000)
            let lookupStart = Date()
            for i in stride(from: 0, to: 100_000, by: 1_000) {
                #expect(try index.localChunkLocations(hash: hash32(i &* 7)).count >= 1)
            }
            let lookupSeconds = Date().timeIntervalSince(lookupStart)
            print(String(format: "[bench] 100,000 file upserts in 10 batches: %.2f s (%.0f files/s); paged read of all: %.2f s; "
                         + "10,000 updates: %.2f s; 100 chunk lookups: %.1f ms",
                         insertSeconds, 100_000 / insertSeconds, readSeconds, updateSeconds, lookupSeconds * 1_000))
        }
    }

    // MARK: Migration

    /// An index created by a build that knew only 0001, with data, is migrated in place.
    @Test func migrationAppliesOnTopOfAnExisting0001Index() throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("index.db").path
            do {
                let db = try Database.open(path: path)
                let first = try #require(Schema.migrations.first)
                try db.transaction {
                    try db.execute("PRAGMA application_id = \(Schema.applicationID)")
                    try db.execute(first.sql)
                    try db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (1, ?, 1)", [.text(first.name)])
                    let peer = samplePeer(2)
                    try db.execute("INSERT INTO peers (device_id, name, public_key, trust, first_seen) VALUES (?, ?, ?, 'paired', 1)",
                                   [.text(peer.deviceID), .text(peer.name), .blob(peer.publicKey)])
                    try db.execute("INSERT INTO folders (folder_id, path, label, created_at) VALUES ('docs', '/d', 'Docs', 5)")
                    try db.execute("INSERT INTO folders (folder_id, path, created_at) VALUES ('empty', '/e', 6)")
                    try db.execute("INSERT INTO folder_peers (folder_id, device_id, acked_sequence, received_sequence) VALUES ('docs', ?, 3, 9)",
                                   [.text(peer.deviceID)])
                    for (n, name) in ["a", "b", "c"].enumerated() {
                        try db.execute(
                            """
                            INSERT INTO files (folder_id, path, sequence, kind, size, mtime_ns, mode, version, root_hash, modified_by)
                            VALUES ('docs', ?, ?, 'file', 10, 1, 420, ?, ?, ?)
                            """,
                            [.text(name), .integer(Int64([4, 7, 2][n])), .text("{\"\(peer.deviceID)\":\(n + 1)}"),
                             .blob(hash32(n)), .text(peer.deviceID)])
                        try db.execute("INSERT INTO file_chunks (file_id, chunk_index, offset, size, hash) VALUES (?, 0, 0, 10, ?)",
                                       [.integer(db.lastInsertRowID), .blob(hash32(100 + n))])
                    }
                    for (id, state) in [("t-paused", "paused"), ("t-done", "completed")] {
                        try db.execute(
                            """
                            INSERT INTO transfers (transfer_id, direction, device_id, name, size, mode, mtime_ns, root_hash,
                                                   chunk_count, state, created_at, updated_at)
                            VALUES (?, 'send', ?, 'x.bin', 10, 420, 1, ?, 1, ?, 1, 1)
                            """, [.text(id), .text(peer.deviceID), .blob(hash32(200)), .text(state)])
                    }
                }
            }
            let index = try NodeIndex.open(at: path, clock: fixedClock)
            #expect(try index.schemaVersion() == Schema.latestVersion)
            let docs = try #require(try index.folder(id: "docs"))
            #expect(docs.label == "Docs" && docs.createdAt == 5 && docs.error == nil)
            #expect(docs.maxSequence == 7, "the counter starts at the highest existing sequence")
            #expect(docs.indexID > 0)
            #expect(docs.rootDevice == nil && docs.rootInode == nil, "an upgraded folder has no root identity until its first start")
            let empty = try #require(try index.folder(id: "empty"))
            #expect(empty.maxSequence == 0 && empty.indexID > 0)
            // 0004 (SHA-256 content) and 0005 (BLAKE3): the exchange starts over, the records
            // wait for the rehash at the next start, an unfinished transfer ends (its manifest
            // is of the old hash).
            #expect(try index.folderPeer(folderID: "docs", deviceID: deviceID(2))
                    == FolderPeerRecord(folderID: "docs", deviceID: deviceID(2), ackedSequence: 0, receivedSequence: 0))
            #expect(try index.foldersWithOldContentHashes() == ["docs", "empty"])
            #expect(try index.transfer(id: "t-paused")?.state == .failed)
            #expect(try index.transfer(id: "t-paused")?.error?.contains("content hash") == true)
            #expect(try index.transfer(id: "t-done")?.state == .completed)
            try index.markContentHashesCurrent(folderID: "docs")
            #expect(try index.foldersWithOldContentHashes() == ["empty"])
            #expect(try index.addFolder(id: "new", path: "/n").id == "new")
            #expect(try index.foldersWithOldContentHashes() == ["empty"], "a folder added now holds BLAKE3 hashes only")
            let files = try index.files(folderID: "docs")
            #expect(files.map(\.path) == ["a", "b", "c"])
            #expect(files.map(\.sequence) == [4, 7, 2])
            #expect(files[1].version == [deviceID(2): 2])
            #expect(files[2].chunks == [FileChunkRecord(offset: 0, size: 10, hash: hash32(102))])
            #expect(try index.upsertFiles([sampleFile("docs", "d")])[0].sequence == 8)
            try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2), [sampleRemote("a", sequence: 10)])
            #expect(try index.files(rootHash: hash32(1), folderID: "docs").map(\.path) == ["b"])
        }
    }
}

extension FolderIndexTests {
    /// An index of protocol version 3 (migrations up to 0004: SHA-256 content, one folder
    /// still marked BLAKE2b-256 by a 0004 pass whose root was missing) is migrated by 0005:
    /// every folder waits for the BLAKE3 rehash, what the peer told us is dropped and the
    /// exchange starts over, and an unfinished transfer ends as failed, saying why.
    @Test func migration0005MarksEveryFolderForTheBLAKE3Rehash() throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("index.db").path
            try makeIndex(at: path, upTo: 4) { db in
                let peer = samplePeer(2)
                try db.execute("INSERT INTO peers (device_id, name, public_key, trust, first_seen) VALUES (?, ?, ?, 'paired', 1)",
                               [.text(peer.deviceID), .text(peer.name), .blob(peer.publicKey)])
                try db.execute("INSERT INTO folders (folder_id, path, label, created_at, index_id) VALUES ('docs', '/d', 'Docs', 5, 1)")
                try db.execute("INSERT INTO folders (folder_id, path, created_at, index_id, content_hash) VALUES ('old', '/o', 6, 2, 'blake2b-256')")
                try db.execute(
                    "INSERT INTO folder_peers (folder_id, device_id, acked_sequence, received_sequence, remote_index_id) VALUES ('docs', ?, 3, 9, 7)",
                    [.text(peer.deviceID)])
                try db.execute(
                    """
                    INSERT INTO remote_files (folder_id, device_id, path, sequence, kind, size, mtime_ns, mode, version, root_hash, modified_by)
                    VALUES ('docs', ?, 'r', 9, 'file', 0, 1, 420, '{}', ?, ?)
                    """, [.text(peer.deviceID), .blob(hash32(9)), .text(peer.deviceID)])
                for (id, state) in [("t-active", "active"), ("t-done", "completed")] {
                    try db.execute(
                        """
                        INSERT INTO transfers (transfer_id, direction, device_id, name, size, mode, mtime_ns, root_hash,
                                               chunk_count, state, created_at, updated_at)
                        VALUES (?, 'receive', ?, 'x.bin', 10, 420, 1, ?, 1, ?, 1, 1)
                        """, [.text(id), .text(peer.deviceID), .blob(hash32(200)), .text(state)])
                }
            }
            let index = try NodeIndex.open(at: path, clock: fixedClock)
            #expect(try index.schemaVersion() == Schema.latestVersion)
            #expect(try index.foldersWithOldContentHashes() == ["docs", "old"], "SHA-256 and BLAKE2b-256 folders alike")
            try withRawDatabase(index) { (db: Database) throws in
                let columns = try db.query("SELECT name FROM pragma_table_info('folders')").map { $0[0] }
                #expect(columns.contains(.text("content_function")) && !columns.contains(.text("content_hash")),
                        "0004's column is replaced, not left beside the new one: \(columns)")
            }
            #expect(try index.remoteFiles(folderID: "docs", deviceID: deviceID(2)).isEmpty)
            #expect(try index.folderPeer(folderID: "docs", deviceID: deviceID(2))
                    == FolderPeerRecord(folderID: "docs", deviceID: deviceID(2), ackedSequence: 0, receivedSequence: 0))
            let failed = try #require(try index.transfer(id: "t-active"))
            #expect(failed.state == .failed && failed.error?.contains("protocol version 4") == true)
            #expect(try index.transfer(id: "t-done")?.state == .completed)
            try index.markContentHashesCurrent(folderID: "old")
            #expect(try index.foldersWithOldContentHashes() == ["docs"])
            _ = try index.addFolder(id: "new", path: "/n")
            #expect(try index.foldersWithOldContentHashes() == ["docs"], "a folder added now is BLAKE3")
        }
    }
}

/// Makes an index at `path` as a binary of schema version `version` left it (migrations 1
/// through `version`), with the rows `rows` inserts in the same transaction.
func makeIndex(at path: String, upTo version: Int, rows: (Database) throws -> Void) throws {
    let db = try Database.open(path: path)
    try db.transaction {
        try db.execute("PRAGMA application_id = \(Schema.applicationID)")
        for migration in Schema.migrations.prefix(version) {
            try db.execute(migration.sql)
            try db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 1)",
                           [.integer(Int64(migration.version)), .text(migration.name)])
        }
        try rows(db)
    }
}

/// Runs `body` with the index's own connection (raw SQL in tests).
func withRawDatabase(_ index: NodeIndex, _ body: (Database) throws -> Void) throws {
    try index.read { db in try body(db) }
}

extension FolderIndexTests {
    /// The opcodes SQLite runs for an upsert of one row of `table`, on the index's own connection.
    private func upsertOpcodes(_ index: NodeIndex, table: String) throws -> [String] {
        var opcodes: [String] = []
        try withRawDatabase(index) { (db: Database) throws in
            let sql = table == "files"
                ? """
                  EXPLAIN INSERT INTO files (folder_id, path, sequence, kind, size, mtime_ns, mode, modified_by)
                  VALUES ('docs', 'x', 1, 'file', 0, 0, 420, 'd') ON CONFLICT (folder_id, path) DO UPDATE SET kind = excluded.kind
                  """
                : """
                  EXPLAIN INSERT INTO remote_files (folder_id, device_id, path, sequence, kind, size, mtime_ns, mode, modified_by)
                  VALUES ('docs', 'd', 'x', 1, 'file', 0, 0, 420, 'd')
                  ON CONFLICT (folder_id, device_id, path) DO UPDATE SET kind = excluded.kind
                  """
            opcodes = try db.query(sql).map { try $0.string("opcode") }
        }
        return opcodes
    }

    /// 0006: the CHECK on `kind` of `files` and `remote_files` is a comparison, not an IN list
    /// (SQLite built a temporary b-tree of the list on every upsert: 2.3 µs of 7). An index of
    /// version 5 keeps its rows, refuses a bad kind as before, and its own connection (which
    /// ran the migration) no longer builds the list; a new index is the same.
    @Test func migration0006ChecksKindsWithoutATemporaryTable() throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("index.db").path
            try makeIndex(at: path, upTo: 5) { db in
                // Rows of every kind, stored under the old check.
                let peer = samplePeer(2)
                try db.execute("INSERT INTO peers (device_id, name, public_key, trust, first_seen) VALUES (?, ?, ?, 'paired', 1)",
                               [.text(peer.deviceID), .text(peer.name), .blob(peer.publicKey)])
                try db.execute("INSERT INTO folders (folder_id, path, label, created_at, index_id, max_sequence) VALUES ('docs', '/d', '', 5, 1, 3)")
                try db.execute("INSERT INTO folder_peers (folder_id, device_id) VALUES ('docs', ?)", [.text(peer.deviceID)])
                for (n, kind) in ["file", "directory", "symlink"].enumerated() {
                    try db.execute(
                        """
                        INSERT INTO files (folder_id, path, sequence, kind, size, mtime_ns, mode, version, root_hash, modified_by)
                        VALUES ('docs', ?, ?, ?, 0, 1, 420, '{}', ?, ?)
                        """, [.text("p\(n)"), .integer(Int64(n + 1)), .text(kind), n == 0 ? .blob(hash32(n)) : .null, .text(peer.deviceID)])
                    try db.execute(
                        """
                        INSERT INTO remote_files (folder_id, device_id, path, sequence, kind, size, mtime_ns, mode, version, modified_by)
                        VALUES ('docs', ?, ?, ?, ?, 0, 1, 420, '{}', ?)
                        """, [.text(peer.deviceID), .text("r\(n)"), .integer(Int64(n + 1)), .text(kind), .text(peer.deviceID)])
                }
            }
            let index = try NodeIndex.open(at: path, clock: fixedClock)
            #expect(try index.schemaVersion() == Schema.latestVersion)
            #expect(try index.files(folderID: "docs").map(\.kind) == [.file, .directory, .symlink])
            #expect(try index.remoteFiles(folderID: "docs", deviceID: deviceID(2)).map(\.kind) == [.file, .directory, .symlink])
            #expect(try index.upsertFiles([sampleFile("docs", "new")])[0].sequence == 4)
            for table in ["files", "remote_files"] {
                #expect(!(try upsertOpcodes(index, table: table)).contains("OpenEphemeral"), "\(table): the check builds no table")
            }
            try withRawDatabase(index) { (db: Database) throws in
                #expect(try db.query("PRAGMA integrity_check").first?[0] == .text("ok"))
                for sql in [
                    "INSERT INTO files (folder_id, path, sequence, kind, size, mtime_ns, mode, modified_by) VALUES ('docs', 'x', 99, 'fifo', 0, 0, 420, 'd')",
                    "INSERT INTO remote_files (folder_id, device_id, path, sequence, kind, size, mtime_ns, mode, modified_by) VALUES ('docs', '\(deviceID(2))', 'x', 9, 'fifo', 0, 0, 420, 'd')",
                ] {
                    #expect(throws: IndexError.self, "a bad kind is still refused") { try db.execute(sql) }
                }
            }
            let fresh = try NodeIndex.open(at: dir.appendingPathComponent("fresh.db").path, clock: fixedClock)
            for table in ["files", "remote_files"] {
                #expect(!(try upsertOpcodes(fresh, table: table)).contains("OpenEphemeral"), "new index, \(table)")
            }
        }
    }
}
