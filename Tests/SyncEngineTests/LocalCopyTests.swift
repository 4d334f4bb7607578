import PeerModel
import Foundation
import Glibc
import PeerFiles
import PeerIndex
import Testing
@testable import SyncEngine

/// The ranges a pull takes from local files: copied in the kernel, byte for byte, and only
/// from a file that is still exactly what the index recorded.
@Suite struct LocalCopyTests {
    static func temporaryDirectory() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("local-copy-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// `count` random bytes.
    static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var generator = SystemRandomNumberGenerator()
        out.withUnsafeMutableBytes { raw in
            for i in stride(from: 0, to: count & ~7, by: 8) { raw.storeBytes(of: generator.next(), toByteOffset: i, as: UInt64.self) }
        }
        return out
    }

    static func record(of path: String, size: Int64? = nil, mtimeNs: Int64? = nil) -> FileRecord {
        var st = stat()
        _ = stat(path, &st)
        let mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        return FileRecord(folderID: "f", FileEntry(path: "a.bin", kind: .file, size: size ?? Int64(st.st_size), mtimeNs: mtimeNs ?? mtime, mode: 0o644, version: [:], modifiedBy: "x"), inode: UInt64(st.st_ino))
    }

    @Test func rangesAreCopiedByteForByte() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let source = Self.bytes(80 << 20 | 12_345)   // more than two writeback intervals
        try Data(source).write(to: URL(fileURLWithPath: dir + "/a.bin"))
        let from = open(dir + "/a.bin", O_RDONLY)
        let to = open(dir + "/b.bin", O_RDWR | O_CREAT, 0o600)
        defer { close(from); close(to) }
        var expected = Self.bytes(source.count)
        try Data(expected).write(to: URL(fileURLWithPath: dir + "/b.bin"))
        // Two ranges at other offsets than in the source, one of them shifted by one byte.
        #expect(FolderApplier.copyRange(from, from: 1, into: to, at: 0, length: 70 << 20) == 0)
        expected.replaceSubrange(0..<(70 << 20), with: source[1..<(70 << 20) + 1])
        #expect(FolderApplier.copyRange(from, from: UInt64(source.count - 5_000), into: to, at: 75 << 20, length: 5_000) == 0)
        expected.replaceSubrange((75 << 20)..<(75 << 20) + 5_000, with: source[(source.count - 5_000)...])
        let written = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/b.bin")))
        #expect(written == expected, "the target holds exactly the copied ranges and nothing else changed")
        // A range past the end of the source is an error, not a short file.
        #expect(FolderApplier.copyRange(from, from: UInt64(source.count - 10), into: to, at: 0, length: 100) == ENODATA)
    }

    @Test func onlyAFileThatIsWhatTheIndexRecordedIsTrusted() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/a.bin"
        try Data(Self.bytes(100_000)).write(to: URL(fileURLWithPath: path))
        let recorded = Self.record(of: path)
        #expect(FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: recorded).trusted)
        #expect(!FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: nil).trusted, "not in the index")
        #expect(!FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: Self.record(of: path, size: 99_999)).trusted,
                "another size")
        #expect(!FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: Self.record(of: path, mtimeNs: recorded.mtimeNs - 1)).trusted,
                "another mtime")
        var tombstone = recorded
        tombstone.deleted = true
        #expect(!FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: tombstone).trusted, "a deleted entry")
        var other = recorded
        other.inode = recorded.inode.map { $0 + 1 }
        #expect(!FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: other).trusted, "another file (inode)")

        // Written to while open: no longer unchanged, so what was copied from it is verified.
        let source = FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: recorded)
        #expect(source.unchanged)
        let writer = open(path, O_WRONLY)
        var byte: UInt8 = 0
        _ = pwrite(writer, &byte, 1, 200_000)
        close(writer)
        #expect(!source.unchanged)
    }

    /// A location looked up before the file was replaced and recorded anew (by an earlier
    /// batch of the same apply) names a chunk the file no longer has there: it is not copied
    /// unverified, even though the file is exactly what the index records now.
    @Test func aTrustedFileLendsOnlyTheChunksItsRecordLists() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (path, content, recorded, first, second) = try Self.twoChunkFile(in: dir)
        let source = FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: recorded)
        #expect(source.trusted)
        func location(_ offset: Int64, _ size: Int64) -> ChunkLocation {
            ChunkLocation(folderID: "f", path: "a.bin", offset: offset, size: size)
        }
        #expect(source.holds(location(0, 60_000), hash: first))
        #expect(source.holds(location(60_000, 40_000), hash: second))
        #expect(!source.holds(location(0, 60_000), hash: ChunkHash.of(Array(content[1..<60_001]))), "the old content's chunk")
        #expect(!source.holds(location(60_000, 60_000), hash: first), "another offset")
        #expect(!source.holds(location(0, 50_000), hash: first), "another size")
        let untrusted = FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: nil)
        #expect(!untrusted.holds(location(0, 60_000), hash: first))
    }

    /// A file whose stamp (size, mtime, inode) is still what the index recorded, but whose
    /// bytes changed in place (bit rot; a program that wrote and put the mtime back): the
    /// chunk that changed is dropped from the copy (to be fetched), the one that did not stays.
    @Test func aTrustedFileLendsNoChunkThatNoLongerHashesRight() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (path, content, recorded, first, second) = try Self.twoChunkFile(in: dir)
        var st = stat()
        #expect(stat(path, &st) == 0)
        let writer = open(path, O_WRONLY)
        var byte = content[70_000] ^ 1
        _ = pwrite(writer, &byte, 1, 70_000)
        var times = [st.st_atim, st.st_mtim]
        #expect(futimens(writer, &times) == 0)
        close(writer)
        let source = FolderApplier.LocalSource(fd: open(path, O_RDONLY), record: recorded)
        #expect(source.trusted, "the stamp is what the index recorded")
        let chunks = [ChunkRef(offset: 0, size: 60_000, hash: first), ChunkRef(offset: 60_000, size: 40_000, hash: second)]
        let run = FolderApplier.CopyRun(source: source, from: 0, to: 0, length: 100_000, chunks: chunks)
        let (runs, failed) = FolderApplier.verified([run])
        #expect(failed == [chunks[1]], "a rotten chunk was lent")
        #expect(runs.count == 1 && runs[0].chunks == [chunks[0]] && runs[0].length == 60_000)
    }

    /// `dir/a.bin`, 100,000 bytes recorded as two chunks (60,000 and 40,000 bytes): its path,
    /// content, record (the index's, stamp included) and the two chunks' hashes.
    static func twoChunkFile(in dir: String) throws -> (path: String, content: [UInt8], record: FileRecord, first: ChunkHash, second: ChunkHash) {
        let path = dir + "/a.bin"
        let content = bytes(100_000)
        try Data(content).write(to: URL(fileURLWithPath: path))
        var recorded = record(of: path)
        let first = ChunkHash.of(Array(content[0..<60_000])), second = ChunkHash.of(Array(content[60_000...]))
        recorded.chunks = [FileChunkRecord(offset: 0, size: 60_000, hash: first.bytes),
                           FileChunkRecord(offset: 60_000, size: 40_000, hash: second.bytes)]
        return (path, content, recorded, first, second)
    }
}
