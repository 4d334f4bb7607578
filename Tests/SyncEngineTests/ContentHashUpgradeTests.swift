import PeerModel
import Foundation
import PeerCrypto
import PeerFiles
@testable import PeerIndex
import Testing
@testable import SyncEngine

/// Migration 0005 marks folders whose records hold SHA-256 hashes (0004 did BLAKE2b-256
/// ones); the pass at start hashes unchanged files again with BLAKE3 (same chunks, same
/// version) and leaves changed ones to the scan.
struct ContentHashUpgradeTests {
    static let me = String(repeating: "A", count: 56)

    /// A record as a version-3 node stored it: the file's chunk ranges with SHA-256 hashes
    /// and the old root, and the stamp of the file on disk.
    static func oldRecord(folderID: String, root: String, path: String, version: [String: UInt64]) throws -> FileRecord {
        let full = root + "/" + path
        var st = stat()
        #expect(stat(full, &st) == 0)
        let fresh = try FileChunker.manifest(ofFileAt: full)
        let chunks = try fresh.chunks.map { chunk -> FileChunkRecord in
            let bytes = try Array(FileHandle(forReadingFrom: URL(fileURLWithPath: full)).readToEnd() ?? Data())
            let range = Int(chunk.offset)..<(Int(chunk.offset) + Int(chunk.size))
            return FileChunkRecord(offset: Int64(chunk.offset), size: Int64(chunk.size), hash: SHA256.hash(Array(bytes[range])))
        }
        return FileRecord(folderID: folderID, FileEntry(path: path, kind: .file, size: Int64(st.st_size), mtimeNs: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec), mode: UInt32(st.st_mode) & 0o7777, version: VersionVector(version), rootHash: SHA256.hash(Array("old root \(path)".utf8)), modifiedBy: me), inode: UInt64(st.st_ino), chunks: chunks)
    }

    @Test func unchangedFilesGetBLAKE3HashesAndKeepTheirVersionsChangedOnesAreLeftToTheScan() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hash-upgrade-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        var generator = SystemRandomNumberGenerator()
        func write(_ path: String, _ count: Int) throws {
            try Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: URL(fileURLWithPath: root + "/" + path))
        }
        try write("big.bin", 700_000)
        try write("sub/small.txt", 5_000)
        try write("edited.bin", 90_000)
        try write("empty", 0)

        let index = try NodeIndex.inMemory()
        try index.addFolder(id: "docs", path: root)
        let old = try ["big.bin", "sub/small.txt", "edited.bin", "empty"].map {
            try Self.oldRecord(folderID: "docs", root: root, path: $0, version: [Self.me: 3])
        }
        var gone = old[1]
        gone.path = "gone.txt"
        let directory = FileRecord(folderID: "docs", FileEntry(path: "sub", kind: .directory, mtimeNs: 1, mode: 0o755, version: [Self.me: 1], modifiedBy: Self.me), inode: 9)
        _ = try index.upsertFiles(old + [gone, directory])
        try write("edited.bin", 91_000) // changed after the record: another size and other bytes
        try index.write { db in try db.execute("UPDATE folders SET content_function = 'sha256'") }
        #expect(try index.foldersWithOldContentHashes() == ["docs"])

        let summary = try ContentHashUpgrade.run(index: index)
        #expect(summary == ContentHashUpgrade.Summary(folders: 1, rehashed: 3, left: 2))
        #expect(try index.foldersWithOldContentHashes().isEmpty)

        for path in ["big.bin", "sub/small.txt", "empty"] {
            let record = try #require(try index.file(folderID: "docs", path: path))
            let expected = try FileChunker.manifest(ofFileAt: root + "/" + path)
            #expect(record.rootHash == expected.rootHash, "\(path): the BLAKE3 root")
            #expect(record.chunks.map(\.hash) == expected.chunks.map(\.hash.bytes), "\(path): BLAKE3 chunk hashes")
            #expect(record.manifest == expected)
            #expect(record.version == [Self.me: 3], "\(path): no edit recorded")
            #expect(record.inode != nil, "\(path): still trusted as unchanged")
        }
        #expect(try index.file(folderID: "docs", path: "big.bin")?.chunks.count ?? 0 > 1)
        for path in ["edited.bin", "gone.txt"] {
            let record = try #require(try index.file(folderID: "docs", path: path))
            #expect(record.hasStaleHashes && record.manifest == nil, "\(path): left to the first scan, never offered as is")
            #expect(record.version == [Self.me: 3])
        }
        #expect(try index.file(folderID: "docs", path: "sub")?.kind == .directory)
        #expect(try ContentHashUpgrade.run(index: index) == ContentHashUpgrade.Summary(), "a second start has nothing to do")
    }

    /// A pass interrupted after some records were hashed again (the node stopped mid-way):
    /// the next start hashes only the stale ones and leaves the others as they are.
    @Test func anInterruptedPassHashesOnlyTheRecordsStillStale() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hash-upgrade-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try Data((0..<70_000).map { UInt8($0 % 251) }).write(to: URL(fileURLWithPath: root + "/done.bin"))
        try Data((0..<50_000).map { UInt8($0 % 241) }).write(to: URL(fileURLWithPath: root + "/stale.bin"))
        let index = try NodeIndex.inMemory()
        try index.addFolder(id: "docs", path: root)
        let stale = try ["done.bin", "stale.bin"].map { try Self.oldRecord(folderID: "docs", root: root, path: $0, version: [Self.me: 2]) }
        let rehashedBefore = try #require(ContentHashUpgrade.rehashed(stale[0], under: DirectoryHandle(path: root)))
        _ = try index.upsertFiles([rehashedBefore, stale[1]])
        try index.write { db in try db.execute("UPDATE folders SET content_function = 'sha256'") }
        let done = try #require(try index.file(folderID: "docs", path: "done.bin"))
        let staleBefore = try #require(try index.file(folderID: "docs", path: "stale.bin"))
        #expect(!done.hasStaleHashes && staleBefore.hasStaleHashes)

        #expect(try ContentHashUpgrade.run(index: index) == ContentHashUpgrade.Summary(folders: 1, rehashed: 1, left: 0))
        #expect(try index.file(folderID: "docs", path: "done.bin") == done, "a record already hashed again is not rewritten")
        let after = try #require(try index.file(folderID: "docs", path: "stale.bin"))
        let expected = try FileChunker.manifest(ofFileAt: root + "/stale.bin")
        #expect(after.manifest == expected && after.version == [Self.me: 2])
        #expect(try index.foldersWithOldContentHashes().isEmpty)
    }

    /// A root that is not the shared one (missing, or an unmounted disk's empty mount point):
    /// nothing is touched and the folder stays marked for the next start.
    @Test(arguments: [false, true])
    func aRootThatIsNotTheSharedOneIsLeftForTheNextStart(emptyMountPoint: Bool) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hash-upgrade-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: root + "/a"))
        let index = try NodeIndex.inMemory()
        try index.addFolder(id: "docs", path: root)
        let record = try Self.oldRecord(folderID: "docs", root: root, path: "a", version: [Self.me: 1])
        _ = try index.upsertFiles([record])
        try FileManager.default.removeItem(atPath: root)
        if emptyMountPoint { try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true) }
        try index.write { db in try db.execute("UPDATE folders SET content_function = 'sha256'") }
        #expect(try ContentHashUpgrade.run(index: index) == ContentHashUpgrade.Summary(folders: 0, rehashed: 0, left: 1))
        let after = try #require(try index.file(folderID: "docs", path: "a"))
        #expect(after.chunks == record.chunks && after.inode == record.inode && after.version == record.version)
        #expect(try index.foldersWithOldContentHashes() == ["docs"])
    }
}
