import PeerModel
import Foundation
import Glibc
import Testing
import PeerFiles
import PeerIndex
import Synchronization
@testable import SyncEngine

/// Issue 41: the content-addressed versions store.
struct VersionStoreTests {
    static func home() throws -> String {
        let path = NSTemporaryDirectory() + "version-store-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func random(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        return (0..<count).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    /// A chunk is stored only under its own hash, and read back only while its bytes still
    /// hash to it: a damaged file reads as nothing and is removed, and the versions that
    /// needed it are no longer counted as held.
    @Test func everyChunkIsVerifiedOnWriteAndOnRead() throws {
        let home = try Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let store = VersionStore(versionsDirectory: home + "/versions")
        let bytes = Self.random(10_000, seed: 1)
        let hash = ChunkHash.of(bytes)
        #expect(!store.put(Self.random(10_000, seed: 2), hash: hash), "stored bytes under another hash")
        #expect(!store.has(hash))
        #expect(store.put(bytes, hash: hash))
        #expect(store.read(hash, size: bytes.count) == bytes)
        #expect(store.read(hash, size: bytes.count - 1) == nil, "read with the wrong size")
        var st = stat()
        #expect(stat(store.path(of: hash), &st) == 0 && st.st_mode & 0o777 == 0o600)
        // Bit rot in the store.
        store.put(bytes, hash: hash)
        var damaged = bytes
        damaged[5_000] ^= 1
        try Data(damaged).write(to: URL(fileURLWithPath: store.path(of: hash)))
        #expect(store.read(hash, size: bytes.count) == nil)
        #expect(!store.has(hash), "the damaged file is still there")
    }

    /// 100 versions of a file edited in one place each time cost about the changed chunks,
    /// not 100 copies: chunks are deduplicated between versions (content-defined boundaries).
    /// Scaled: a 16 MiB file with 128 KiB changed each time, chunks of 64 KiB on average
    /// (the same ratio of change to chunk as 1 MiB in a 1 GiB file, whose chunks average
    /// 512 KiB). 30 versions in `make test`; `VERSIONS_MEASURE_COUNT=100` for the figure
    /// (`VERSIONS_MEASURE_MB` for another size); it prints what it measured.
    @Test func aHundredVersionsOfALargeFileCostTheChangesNotTheCopies() throws {
        let home = try Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let megabytes = Int(ProcessInfo.processInfo.environment["VERSIONS_MEASURE_MB"] ?? "") ?? 16
        let versions = Int(ProcessInfo.processInfo.environment["VERSIONS_MEASURE_COUNT"] ?? "") ?? 30
        let size = megabytes << 20, change = size / 128
        let index = try NodeIndex.inMemory()
        _ = try index.addFolder(id: "f", path: home + "/folder")
        let keeper = VersionKeeper(versionsDirectory: home + "/versions", index: index)
        let file = home + "/big.bin"
        var content = Self.random(size, seed: 7)
        var seed: UInt64 = 100
        let started = Date()
        for n in 0..<versions {
            try Data(content).write(to: URL(fileURLWithPath: file))
            let record = FileRecord(folderID: "f", FileEntry(path: "big.bin", kind: .file, size: Int64(size), mtimeNs: Int64(n), mode: 0o644, version: ["A": UInt64(n + 1)], rootHash: [UInt8](repeating: 0, count: 32), modifiedBy: "A", sequence: 1))
            #expect(keeper.keepFile(at: file, as: record, reason: "peer-edit") != nil)
            // The next edit: `change` bytes somewhere in the file.
            seed &+= 1
            let at = Int(seed &* 2_654_435_761 % UInt64(size - change))
            content.replaceSubrange(at..<at + change, with: Self.random(change, seed: seed))
        }
        let stored = keeper.store.storedBytes()
        let ages = try index.versionAges(folderID: "f")
        #expect(ages.count == versions)
        let logical = Int64(size) * Int64(versions)
        print("versions store: \(versions) versions of \(megabytes) MiB, \(change >> 10) KiB changed each: \(stored) bytes stored "
              + "(\(String(format: "%.2f", Double(stored) / Double(size))) × the file; \(logical) bytes as copies) in "
              + String(format: "%.1f s", Date().timeIntervalSince(started)))
        // The first version whole, then at most four average chunks per edit.
        #expect(stored < Int64(size) + Int64(versions) * 4 * Int64(max(change, 64 << 10)), "\(stored) bytes")
        // Every version reads back whole and verified.
        let last = try #require(try index.version(folderID: "f", id: ages.last!.id))
        var rebuilt: [UInt8] = []
        for chunk in last.chunks {
            let hash = try #require(ChunkHash(bytes: chunk.hash))
            rebuilt += try #require(keeper.store.read(hash, size: Int(chunk.size)))
        }
        #expect(rebuilt == Array(try Data(contentsOf: URL(fileURLWithPath: file))))
    }

    /// Expiry removes what the policy no longer keeps, and frees the chunks no remaining
    /// version uses (shared chunks stay).
    @Test func expiryFreesOnlyChunksNoVersionUses() throws {
        let home = try Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let index = try NodeIndex.inMemory()
        _ = try index.addFolder(id: "f", path: home + "/folder")
        let clock = Mutex<Int64>(1_000_000)
        let keeper = VersionKeeper(versionsDirectory: home + "/versions", index: index, clock: { clock.withLock { $0 } })
        try keeper.setPolicy(VersionPolicy(parsing: "simple 1")!, folderID: "f")
        let shared = Self.random(70_000, seed: 3)
        for n in 0..<3 {
            let file = home + "/v\(n)"
            try Data(shared + Self.random(70_000, seed: UInt64(10 + n))).write(to: URL(fileURLWithPath: file))
            let record = FileRecord(folderID: "f", FileEntry(path: "a.bin", kind: .file, size: 140_000, mtimeNs: Int64(n), mode: 0o644, version: ["A": UInt64(n + 1)], rootHash: [UInt8](repeating: 0, count: 32), modifiedBy: "A", sequence: 1))
            keeper.keepFile(at: file, as: record, reason: "peer-edit")
            clock.withLock { $0 += 1_000 }
        }
        let before = keeper.store.storedBytes()
        #expect(keeper.expire(folderID: "f", now: clock.withLock { $0 }, fileSystemBytes: 1 << 40) == 2)
        let left = try index.versionAges(folderID: "f")
        #expect(left.count == 1)
        let kept = try #require(try index.version(folderID: "f", id: left[0].id))
        #expect(kept.chunks.allSatisfy { keeper.store.has(ChunkHash(bytes: $0.hash)!) }, "a chunk of the kept version went")
        #expect(keeper.store.storedBytes() < before)
        // A cap below the store's size takes the oldest versions until it fits.
        try keeper.setPolicy(VersionPolicy(parsing: "simple 5 cap 1")!, folderID: "f")
        keeper.expire(folderID: "f", now: clock.withLock { $0 }, fileSystemBytes: 1 << 40)
        #expect(try index.versionAges(folderID: "f").isEmpty)
        #expect(keeper.store.storedBytes() == 0)
    }
}
