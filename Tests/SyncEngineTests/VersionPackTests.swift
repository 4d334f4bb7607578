import PeerModel
import Foundation
import Glibc
import Testing
import PeerFiles
import PeerIndex
@testable import SyncEngine

/// Versions of large files kept without copying them: the file a peer's edit swapped out of
/// the folder becomes a pack (its own inode, linked under versions/.packs), read chunk by
/// chunk and verified; a pack goes with the last version using it.
struct VersionPackTests {
    /// A keeper over a real directory: the folder, its swapped-out old file, the store.
    final class Setup {
        let home: String
        let folder: String
        let index: NodeIndex
        let keeper: VersionKeeper
        let clock = Clock()

        final class Clock: @unchecked Sendable {
            var now: Int64 = 1_000_000
        }

        /// `versions`: the store's directory (default: in the home, beside the folder).
        init(versions: String? = nil) throws {
            home = try VersionStoreTests.home()
            folder = home + "/folder"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            index = try NodeIndex.inMemory()
            _ = try index.addFolder(id: "f", path: folder)
            let clock = clock
            keeper = VersionKeeper(versionsDirectory: versions ?? home + "/versions", index: index, clock: { clock.now })
        }

        deinit { try? FileManager.default.removeItem(atPath: home) }

        /// The record of the file at `name` as the index would hold it.
        func record(_ name: String, version: UInt64) throws -> FileRecord {
            let manifest = try FileChunker.manifest(ofFileAt: folder + "/" + name)
            var record = FileRecord(folderID: "f", FileEntry(path: "big.bin", kind: .file, size: Int64(manifest.fileSize), mtimeNs: Int64(version),
                                                             mode: 0o644, version: ["A": version], rootHash: manifest.rootHash,
                                                             modifiedBy: "A", sequence: 1))
            record.chunks = manifest.chunks.map { FileChunkRecord(offset: Int64($0.offset), size: Int64($0.size), hash: $0.hash.bytes) }
            return record
        }

        /// What a peer's edit does to big.bin: the new content is swapped in and the old file
        /// waits at a temporary name, where it is kept, then removed (as the applier does).
        @discardableResult
        func peerEdit(to content: [UInt8], version: UInt64) throws -> (id: Int64?, old: FileRecord, inode: UInt64, left: Bool) {
            let old = try record("big.bin", version: version)
            var st = stat()
            stat(folder + "/big.bin", &st)
            try #require(rename(folder + "/big.bin", folder + "/.big.bin.tmp") == 0)
            try Data(content).write(to: URL(fileURLWithPath: folder + "/big.bin"))
            let id = keeper.keep(old, swappedOut: ".big.bin.tmp", in: try DirectoryHandle(path: folder), reason: "peer-edit")
            let left = access(folder + "/.big.bin.tmp", F_OK) == 0
            unlink(folder + "/.big.bin.tmp")
            return (id, old, UInt64(st.st_ino), left)
        }

        /// The version's bytes as `restore` reads them from the store (nil: a chunk not held).
        func restored(_ id: Int64) throws -> [UInt8]? {
            let version = try #require(try index.version(folderID: "f", id: id))
            var bytes: [UInt8] = []
            for chunk in version.chunks {
                guard let read = keeper.store.read(ChunkHash(bytes: chunk.hash)!, size: Int(chunk.size)) else { return nil }
                bytes += read
            }
            return bytes
        }

        /// Writes big.bin: `VersionPackTests.size` random bytes of `seed`.
        func start(seed: UInt64) throws -> [UInt8] {
            let bytes = VersionStoreTests.random(VersionPackTests.size, seed: seed)
            try Data(bytes).write(to: URL(fileURLWithPath: folder + "/big.bin"))
            return bytes
        }

        var packs: [(name: String, size: Int64)] { keeper.store.packs!.files() }
        func held(_ id: Int64) throws -> Bool { try #require(try index.version(folderID: "f", id: id)).held }
    }

    static let size = 4 << 20

    /// Workload C scaled: a small edit in the middle of a file of many chunks. The version it
    /// replaced is kept as the old inode itself — no chunk file written — and reads back byte
    /// for byte. A later edit of the same file costs its changed chunks only (deduplicated
    /// against the pack), and no second pack.
    @Test func aReplacedLargeFileIsKeptAsItsOwnInodeNotCopied() throws {
        let setup = try Setup()
        let original = try setup.start(seed: 1)
        var edited = original
        edited.replaceSubrange(2_000_000..<2_064_000, with: VersionStoreTests.random(64_000, seed: 2))
        let first = try setup.peerEdit(to: edited, version: 1)
        let id = try #require(first.id)
        #expect(first.old.chunks.count > 16, "\(first.old.chunks.count) chunks")
        #expect(setup.keeper.store.chunkFileBytes() == 0, "the old version was copied into chunk files")
        #expect(setup.packs.map(\.size) == [Int64(Self.size)])
        var st = stat()
        #expect(stat(setup.keeper.store.packs!.path(setup.packs[0].name), &st) == 0 && UInt64(st.st_ino) == first.inode
                && st.st_nlink == 1, "the pack is not the old inode, alone")
        // Moved out of the folder: no name there reaches the pack, not even the hidden one
        // (a later pull of the path opens that name and truncates it).
        #expect(!first.left, "the pack is still linked at its hidden name in the folder")
        #expect(try setup.held(id))
        #expect(try setup.restored(id) == original)

        // The next edit: the store has most of it (in the pack), so only what changed is copied.
        var again = edited
        again.replaceSubrange(500_000..<564_000, with: VersionStoreTests.random(64_000, seed: 3))
        let second = try #require(try setup.peerEdit(to: again, version: 2).id)
        #expect(setup.packs.count == 1, "a second pack of a file the store mostly had")
        #expect(setup.keeper.store.chunkFileBytes() < 4 * 256 << 10, "\(setup.keeper.store.chunkFileBytes()) bytes copied")
        #expect(try setup.restored(second) == edited)
        #expect(try setup.restored(id) == original)
    }

    /// A pack whose bytes changed (disk damage) never gives wrong bytes: the damaged chunk
    /// reads as not held, the version is no longer counted as held, the others still read.
    @Test func aDamagedPackByteReadsAsNotHeld() throws {
        let setup = try Setup()
        let original = try setup.start(seed: 4)
        let kept = try setup.peerEdit(to: [1, 2, 3], version: 1)
        let id = try #require(kept.id)
        let pack = setup.keeper.store.packs!.path(setup.packs[0].name)
        chmod(pack, 0o600)
        let fd = open(pack, O_WRONLY)
        var flipped = original[3_000_000] ^ 0x40
        pwrite(fd, &flipped, 1, 3_000_000)
        close(fd)
        #expect(try setup.restored(id) == nil, "a damaged pack gave bytes")
        #expect(try !setup.held(id), "the version is still counted as held")
        let damaged = try #require(kept.old.chunks.first { $0.offset <= 3_000_000 && 3_000_000 < $0.offset + $0.size })
        let intact = try #require(kept.old.chunks.first)
        #expect(setup.keeper.store.read(ChunkHash(bytes: damaged.hash)!, size: Int(damaged.size)) == nil)
        #expect(!setup.keeper.store.has(ChunkHash(bytes: damaged.hash)!))
        #expect(setup.keeper.store.read(ChunkHash(bytes: intact.hash)!, size: Int(intact.size)) == Array(original[0..<Int(intact.size)]))
    }

    /// Expiry removes a pack with the last version using a chunk of it, and a cap counts the
    /// packs' bytes (a store of packs alone is not empty).
    @Test func expiryRemovesThePackAndTheCapCountsIt() throws {
        let setup = try Setup()
        let original = try setup.start(seed: 5)
        var edited = original
        edited.replaceSubrange(1_000_000..<1_064_000, with: VersionStoreTests.random(64_000, seed: 6))
        try #require(setup.peerEdit(to: edited, version: 1).id != nil)
        setup.clock.now += 1_000
        try #require(setup.peerEdit(to: [7], version: 2).id != nil)   // mostly the pack's chunks
        #expect(setup.packs.count == 1)
        #expect(setup.keeper.store.storedBytes() >= Int64(Self.size), "the pack's bytes are not counted")

        // The first version goes, the second still uses the pack's chunks: it stays.
        try setup.keeper.setPolicy(VersionPolicy(parsing: "simple 1")!, folderID: "f")
        #expect(setup.keeper.expire(folderID: "f", now: setup.clock.now, fileSystemBytes: 1 << 40) == 1)
        #expect(setup.packs.count == 1)
        let left = try setup.index.versionAges(folderID: "f")
        #expect(try setup.restored(try #require(left.first).id) == edited)

        // A cap below the pack's size: the version goes, and the pack with it.
        try setup.keeper.setPolicy(VersionPolicy(parsing: "simple 5 cap 1M")!, folderID: "f")
        setup.keeper.expire(folderID: "f", now: setup.clock.now, fileSystemBytes: 1 << 40)
        #expect(try setup.index.versionAges(folderID: "f").isEmpty)
        #expect(setup.packs.isEmpty, "the pack outlived every version using it")
        #expect(try setup.index.packNames().isEmpty)
        #expect(setup.keeper.store.storedBytes() == 0)
    }

    /// An old file with another link (the user's hard link elsewhere) is copied, not adopted:
    /// an edit made through that link later must not change the kept version.
    @Test func aHardLinkedOriginalIsCopied() throws {
        let setup = try Setup()
        let original = try setup.start(seed: 8)
        try #require(link(setup.folder + "/big.bin", setup.home + "/elsewhere.bin") == 0)
        let id = try #require(try setup.peerEdit(to: [9], version: 1).id)
        #expect(setup.packs.isEmpty, "a hard-linked inode was adopted")
        #expect(setup.keeper.store.chunkFileBytes() == Int64(Self.size))
        // The user edits the other link in place.
        let fd = open(setup.home + "/elsewhere.bin", O_WRONLY)
        var byte: UInt8 = original[100] ^ 1
        pwrite(fd, &byte, 1, 100)
        close(fd)
        #expect(try setup.restored(id) == original)
        #expect(try setup.held(id))
    }

    /// A store on another file system than the folder (the inode cannot be linked there):
    /// the version is copied as before. A folder whose policy is `none` keeps nothing.
    @Test func anotherFileSystemCopiesAndPolicyNoneKeepsNothing() throws {
        let other = "/dev/shm/version-packs-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: other) }
        var shm = stat(), tmp = stat()
        if stat("/dev/shm", &shm) == 0, stat(NSTemporaryDirectory(), &tmp) == 0, shm.st_dev != tmp.st_dev {
            let setup = try Setup(versions: other)
            let original = try setup.start(seed: 11)
            let id = try #require(try setup.peerEdit(to: [1], version: 1).id)
            #expect(setup.packs.isEmpty, "an inode of another file system was adopted")
            #expect(setup.keeper.store.chunkFileBytes() == Int64(Self.size))
            #expect(try setup.restored(id) == original)
        } else {
            print("anotherFileSystemCopiesAndPolicyNoneKeepsNothing: no /dev/shm on another file system here, that half not run")
        }
        let setup = try Setup()
        try setup.keeper.setPolicy(VersionPolicy(parsing: "none")!, folderID: "f")
        _ = try setup.start(seed: 12)
        #expect(try setup.peerEdit(to: [1], version: 1).id == nil)
        #expect(setup.packs.isEmpty && setup.keeper.store.storedBytes() == 0)
    }

    /// A crash between the link and the index leaves a pack file no row names: the next start
    /// removes it. A pack whose file went (a user cleaning the home) is forgotten, and the
    /// versions that needed it are no longer counted as held.
    @Test func theNextStartTidiesWhatACrashLeft() throws {
        let setup = try Setup()
        _ = try setup.start(seed: 10)
        let id = try #require(try setup.peerEdit(to: [1], version: 1).id)
        let packs = try #require(setup.keeper.store.packs)
        let kept = setup.packs[0].name
        let orphan = "0123abcd-00ff"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: packs.path(orphan)))
        let ours = packs.run + "-beef"   // this run's, not yet recorded: left alone
        try Data([4]).write(to: URL(fileURLWithPath: packs.path(ours)))
        #expect(setup.keeper.tidyPacks() == (1, 0))
        #expect(Set(setup.packs.map(\.name)) == [kept, ours])

        unlink(packs.path(kept))
        #expect(setup.keeper.tidyPacks() == (0, 1))
        #expect(try !setup.held(id))
        #expect(try setup.index.packNames().isEmpty)
    }
}
