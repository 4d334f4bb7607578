import Foundation
@testable import PeerFiles
import Testing
import TestKit

/// A file cut into chunks, with its manifest (small chunks so that there are many).
struct Sample {
    let bytes: [UInt8]
    let manifest: Manifest

    init(count: Int, seed: UInt64) throws {
        bytes = pseudoRandomBytes(count: count, seed: seed)
        let parameters = ChunkParameters(minSize: 2_048, averageSize: 8_192, maxSize: 32_768)
        manifest = try Manifest(fileSize: UInt64(count), chunks: referenceChunks(bytes, parameters: parameters))
    }

    func chunkBytes(_ i: Int) -> [UInt8] {
        let c = manifest.chunks[i]
        return Array(bytes[Int(c.offset)..<Int(c.end)])
    }
}

func fileStat(_ path: String) -> stat {
    var st = stat()
    _ = lstat(path, &st)
    return st
}

@Suite struct PartialFileTests {
    /// What a partial file holds past its last recorded chunk is cut again from that chunk's
    /// end: the same chunks as the whole file's, but the last, which the partial's end cuts.
    @Test func chunksCutFromAKnownCutPointAreTheWholeFilesChunks() throws {
        let sample = try Sample(count: 1 << 20, seed: 12)
        let parameters = ChunkParameters(minSize: 2_048, averageSize: 8_192, maxSize: 32_768)
        try withTemporaryDirectory { dir in
            let path = dir + "/whole.bin"
            try Data(sample.bytes).write(to: URL(fileURLWithPath: path))
            let reader = try ChunkReader(path: path)
            let chunks = sample.manifest.chunks
            let start = chunks[10].offset
            #expect(try reader.cutChunks(from: start, to: UInt64(sample.bytes.count), parameters: parameters) == Array(chunks[10...]))
            let end = chunks[40].offset + 100
            let cut = try reader.cutChunks(from: start, to: end, parameters: parameters)
            #expect(Array(cut.dropLast()) == Array(chunks[10..<40]))
            #expect(cut.last?.offset == chunks[40].offset && cut.last?.end == end)
            #expect(try reader.cutChunks(from: start, to: start, parameters: parameters).isEmpty)
        }
    }

    @Test func writeOutOfOrderThenCommit() throws {
        let sample = try Sample(count: 1 << 20, seed: 11)
        try withTemporaryDirectory { dir in
            let target = try DirectoryHandle(path: dir)
            let partial = try PartialFile(transferID: "t-1", in: target)
            #expect(partial.path == dir + "/.syncpeer-partial/t-1.part")
            var order = Array(sample.manifest.chunks.indices)
            var rng = SplitMix64(seed: 5)
            order.shuffle(using: &rng)
            for i in order { try partial.writeChunk(sample.chunkBytes(i), as: sample.manifest.chunks[i]) }
            #expect(try partial.verifiedChunks(of: sample.manifest) == Array(sample.manifest.chunks.indices))

            let mtime = FileTimestamp(seconds: 1_700_000_000, nanoseconds: 123_456_789)
            let name = try partial.commit(as: "final.bin", mode: 0o640, modificationTime: mtime, size: sample.manifest.fileSize)
            #expect(name == "final.bin")
            #expect(try readFile(dir + "/final.bin") == sample.bytes)
            let st = fileStat(dir + "/final.bin")
            #expect(st.st_mode & 0o7777 == 0o640)
            #expect(st.st_mtim.tv_sec == 1_700_000_000)
            #expect(st.st_mtim.tv_nsec == 123_456_789)
            // The partial is gone; the staging directory stays (0700).
            #expect(!FileManager.default.fileExists(atPath: dir + "/.syncpeer-partial/t-1.part"))
            #expect(fileStat(dir + "/.syncpeer-partial").st_mode & 0o777 == 0o700)
            // The object is closed after a commit.
            #expect(throws: FileError.self) { try partial.write([1], at: 0) }
        }
    }

    /// A resume takes the chunks recorded as verified (durable) without reading them, but
    /// only where the file still reaches: a partial file cut short holds nothing past its
    /// end. Every other chunk is read and hashed (one written wrongly is not held).
    @Test func resumeTrustsRecordedChunksOnlyWithinTheFile() throws {
        try withTemporaryDirectory { dir in
            let sample = try Sample(count: 200_000, seed: 9)
            let chunks = sample.manifest.chunks
            #expect(chunks.count > 10)
            let partial = try PartialFile(transferID: "t-trust", in: try DirectoryHandle(path: dir))
            for i in 0..<6 { try partial.writeChunk(sample.chunkBytes(i), as: chunks[i]) }
            // Chunk 6 holds garbage of the right length (a write torn by a crash).
            try partial.write([UInt8](repeating: 0xAB, count: Int(chunks[6].size)), at: chunks[6].offset)
            try partial.dataSync().sync()
            try partial.dataSync().sync(fileSystem: true)
            // Recorded: 0–2; the file is the truth for 3–6 (3–5 good, 6 torn); 9 is past the end.
            #expect(try partial.verifiedChunks(of: sample.manifest, trusting: [0, 1, 2, 9]) == [0, 1, 2, 3, 4, 5])
            // Cut short inside chunk 4: a recorded chunk past the end is not held.
            try partial.truncate(to: chunks[4].offset + 1)
            #expect(try partial.verifiedChunks(of: sample.manifest, trusting: [0, 1, 2, 3, 4]) == [0, 1, 2, 3])
            #expect(try partial.verifiedChunks(of: sample.manifest) == [0, 1, 2, 3])
        }
    }

    @Test func partialFileIsPrivate() throws {
        try withTemporaryDirectory { dir in
            let partial = try PartialFile(transferID: "abc", in: try DirectoryHandle(path: dir))
            try partial.write([1, 2, 3], at: 0)
            #expect(fileStat(partial.path).st_mode & 0o777 == 0o600)
        }
    }

    @Test func setuidAndStickyBitsFromAPeerAreDropped() throws {
        try withTemporaryDirectory { dir in
            let partial = try PartialFile(transferID: "x", in: try DirectoryHandle(path: dir))
            try partial.commit(as: "tool", mode: 0o4755 | 0o2000 | 0o1000, modificationTime: FileTimestamp(seconds: 0, nanoseconds: 0))
            #expect(fileStat(dir + "/tool").st_mode & 0o7777 == 0o755)
        }
    }

    @Test func emptyFileCommits() throws {
        try withTemporaryDirectory { dir in
            let manifest = try Manifest(fileSize: 0, chunks: [])
            let partial = try PartialFile(transferID: "empty", in: try DirectoryHandle(path: dir))
            #expect(try partial.verifiedChunks(of: manifest) == [])
            try partial.commit(as: "empty.txt", mode: 0o644, modificationTime: FileTimestamp(nanosecondsSinceEpoch: 1_000_000_001),
                               size: manifest.fileSize)
            #expect(try readFile(dir + "/empty.txt") == [])
            #expect(fileStat(dir + "/empty.txt").st_mtim.tv_nsec == 1)
        }
    }

    @Test func commitNeverOverwrites() throws {
        try withTemporaryDirectory { dir in
            let target = try DirectoryHandle(path: dir)
            try writeFile(dir + "/report.pdf", Array("precious".utf8))
            let partial = try PartialFile(transferID: "t2", in: target)
            try partial.write(Array("incoming".utf8), at: 0)
            let mtime = FileTimestamp(seconds: 1, nanoseconds: 0)
            #expect(thrownFileError("commit replaced an existing file") { try partial.commit(as: "report.pdf", mode: 0o644, modificationTime: mtime) }?.kind == .alreadyExists)
            #expect(try readFile(dir + "/report.pdf") == Array("precious".utf8))
            #expect(FileManager.default.fileExists(atPath: partial.path))   // kept for a retry

            // A symbolic link (even dangling) at the final name is not replaced either.
            try FileManager.default.createSymbolicLink(atPath: dir + "/report (1).pdf", withDestinationPath: "/nonexistent")
            let name = try partial.commit(as: "report.pdf", mode: 0o644, modificationTime: mtime, onConflict: .pickUniqueName)
            #expect(name == "report (2).pdf")
            #expect(try readFile(dir + "/report (2).pdf") == Array("incoming".utf8))
            #expect(try readFile(dir + "/report.pdf") == Array("precious".utf8))
        }
    }

    @Test(arguments: [true, false])
    func noReplaceRenameBothWays(useRenameat2: Bool) throws {
        try withTemporaryDirectory { dir in
            let handle = try DirectoryHandle(path: dir)
            try writeFile(dir + "/a", [1])
            try writeFile(dir + "/b", [2])
            #expect(thrownFileError("replaced b") { try PartialFile.renameNoReplace(from: handle, "a", to: handle, "b", useRenameat2: useRenameat2) }?.kind == .alreadyExists)
            #expect(try readFile(dir + "/b") == [2])
            try PartialFile.renameNoReplace(from: handle, "a", to: handle, "c", useRenameat2: useRenameat2)
            #expect(try readFile(dir + "/c") == [1])
            #expect(!FileManager.default.fileExists(atPath: dir + "/a"))
        }
    }

    @Test func commitRefusesHostileNames() throws {
        try withTemporaryDirectory { dir in
            let partial = try PartialFile(transferID: "t", in: try DirectoryHandle(path: dir))
            for name in ["../escape", "a/b", "", "..", "x\u{0}"] {
                #expect(thrownFileError("committed as \(name)") { try partial.commit(as: name, mode: 0o644, modificationTime: FileTimestamp(seconds: 0, nanoseconds: 0)) }?.kind == .invalidArgument)
            }
        }
    }

    @Test(arguments: ["", "../x", "a/b", ".hidden", "x\u{0}", String(repeating: "a", count: 129), "é"])
    func hostileTransferIDsAreRefused(id: String) throws {
        try withTemporaryDirectory { dir in
            #expect(thrownFileError("accepted transfer ID \(id)") { _ = try PartialFile(transferID: id, in: try DirectoryHandle(path: dir)) }?.kind == .invalidArgument)
        }
    }

    @Test func wrongChunkIsNotWritten() throws {
        let sample = try Sample(count: 100_000, seed: 3)
        try withTemporaryDirectory { dir in
            let partial = try PartialFile(transferID: "t", in: try DirectoryHandle(path: dir))
            var bad = sample.chunkBytes(0)
            bad[10] ^= 1
            #expect(thrownFileError("wrote a corrupt chunk") { try partial.writeChunk(bad, as: sample.manifest.chunks[0]) }?.kind == .hashMismatch)
            #expect(throws: FileError.self) { try partial.writeChunk(Array(sample.chunkBytes(0).dropLast()), as: sample.manifest.chunks[0]) }
            #expect(try partial.size() == 0)
            #expect(PartialFile.verify(sample.chunkBytes(0), expected: sample.manifest.chunks[0].hash))
            #expect(!PartialFile.verify(bad, expected: sample.manifest.chunks[0].hash))
        }
    }

    /// The index lost track of the verified chunks: re-hashing the partial file finds
    /// exactly the good ones (not the corrupted one, not the missing ones).
    @Test func existingPartialFindsExactlyTheGoodChunks() throws {
        let sample = try Sample(count: 600_000, seed: 21)
        let chunks = sample.manifest.chunks
        #expect(chunks.count > 20)
        try withTemporaryDirectory { dir in
            let target = try DirectoryHandle(path: dir)
            do {
                let partial = try PartialFile(transferID: "resume", in: target)
                for i in chunks.indices where i != 7 && i < chunks.count - 3 {
                    try partial.writeChunk(sample.chunkBytes(i), as: chunks[i])
                }
                try partial.sync()
            }   // closed, as after a crash
            // Corrupt one byte of chunk 3 behind the partial file's back.
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: dir + "/.syncpeer-partial/resume.part"))
            try handle.seek(toOffset: chunks[3].offset + 100)
            try handle.write(contentsOf: [sample.bytes[Int(chunks[3].offset) + 100] ^ 0xFF])
            try handle.close()

            let reopened = try #require(try PartialFile.existing(transferID: "resume", in: target))
            let good = try reopened.verifiedChunks(of: sample.manifest)
            let expected = chunks.indices.filter { $0 != 3 && $0 != 7 && $0 < chunks.count - 3 }
            #expect(good == expected)
            #expect(try PartialFile.existing(transferID: "other", in: target) == nil)

            // Finish the transfer with the missing chunks and commit.
            for i in Set(chunks.indices).subtracting(good).sorted() { try reopened.writeChunk(sample.chunkBytes(i), as: chunks[i]) }
            #expect(try reopened.verifiedChunks(of: sample.manifest) == Array(chunks.indices))
            try reopened.commit(as: "done", mode: 0o600, modificationTime: FileTimestamp(seconds: 5, nanoseconds: 5), size: sample.manifest.fileSize)
            #expect(try readFile(dir + "/done") == sample.bytes)
        }
    }

    @Test func removeDeletesThePartial() throws {
        try withTemporaryDirectory { dir in
            let target = try DirectoryHandle(path: dir)
            let partial = try PartialFile(transferID: "cancel", in: target)
            try partial.write([1, 2, 3], at: 10)
            #expect(try partial.size() == 13)
            try partial.remove()
            #expect(!FileManager.default.fileExists(atPath: partial.path))
            try partial.remove()   // idempotent
            #expect(try PartialFile.existing(transferID: "cancel", in: target) == nil)
        }
    }

    @Test func symlinkedStagingDirectoryIsRefused() throws {
        try withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/elsewhere", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: dir + "/target", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: dir + "/target/.syncpeer-partial", withDestinationPath: dir + "/elsewhere")
            #expect(thrownFileError("followed a symlinked staging directory") { _ = try PartialFile(transferID: "t", in: try DirectoryHandle(path: dir + "/target")) }?.kind == .symlinkRefused)
        }
    }

    @Test func timestampConversions() {
        #expect(FileTimestamp(nanosecondsSinceEpoch: 1_699_999_999_123_456_789) == FileTimestamp(seconds: 1_699_999_999, nanoseconds: 123_456_789))
        #expect(FileTimestamp(nanosecondsSinceEpoch: -1) == FileTimestamp(seconds: -1, nanoseconds: 999_999_999))
        #expect(FileTimestamp(seconds: 3, nanoseconds: 42).nanosecondsSinceEpoch == 3_000_000_042)
        #expect(FileTimestamp(seconds: 3, nanoseconds: 42).description == "3.000000042")
    }
}

/// Whether this process may mount a tmpfs (root with CAP_SYS_ADMIN: true on the build
/// machine, false in most containers and for ordinary users).
let canMountTmpfs: Bool = {
    (try? withTemporaryDirectory { dir -> Bool in
        guard mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0 else { return false }
        umount2(dir, Int32(MNT_DETACH))
        return true
    }) ?? false
}()

/// A full disk, on a real 1 MiB tmpfs. Needs mount(2); where it is not permitted the test
/// is reported as skipped: `setrlimit(RLIMIT_FSIZE)` would give EFBIG (not ENOSPC) and is
/// process-wide, so it is no substitute.
@Suite(.serialized, .enabled(if: canMountTmpfs, "needs permission to mount a tmpfs")) struct DiskFullTests {
    static func withSmallTmpfs(_ body: (String) throws -> Void) throws {
        try withTemporaryDirectory { dir in
            let mountPoint = dir + "/small"
            try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
            guard mount("tmpfs", mountPoint, "tmpfs", 0, "size=1m,mode=0755") == 0 else {
                Issue.record("cannot mount a tmpfs at \(mountPoint): errno \(errno)")
                return
            }
            defer { umount2(mountPoint, Int32(MNT_DETACH)) }
            try body(mountPoint)
        }
    }

    @Test func diskFullIsTypedAndKeepsThePartial() throws {
        let sample = try Sample(count: 2 << 20, seed: 77)
        try Self.withSmallTmpfs { mountPoint in
            let partial = try PartialFile(transferID: "big", in: try DirectoryHandle(path: mountPoint))
            var written: [Int] = []
            var failure: FileError?
            for i in sample.manifest.chunks.indices {
                do {
                    try partial.writeChunk(sample.chunkBytes(i), as: sample.manifest.chunks[i])
                    written.append(i)
                } catch let error as FileError {
                    failure = error
                    break
                }
            }
            let error = try #require(failure)
            #expect(error.kind == .diskFull)
            #expect(error.errno == Int32(ENOSPC))
            #expect(error.description.contains("disk full"))
            #expect(written.count > 10)
            // The partial file is still there, and every chunk written before is intact.
            #expect(FileManager.default.fileExists(atPath: partial.path))
            let good = try partial.verifiedChunks(of: sample.manifest)
            #expect(Set(written).isSubset(of: Set(good)))
            // Reserving the whole size up front reports the full disk at once.
            let other = try PartialFile(transferID: "other", in: try DirectoryHandle(path: mountPoint))
            #expect(thrownFileError("reserved 2 MiB on a full 1 MiB file system") { try other.reserve(sample.manifest.fileSize) }?.kind == .diskFull)
            try other.remove()
            try partial.remove()
        }
    }
}

@Suite struct ChunkReaderTests {
    @Test func readsEveryChunk() throws {
        let sample = try Sample(count: 500_000, seed: 8)
        try withTemporaryDirectory { dir in
            try writeFile(dir + "/f", sample.bytes)
            let reader = try ChunkReader(path: dir + "/f")
            for (i, chunk) in sample.manifest.chunks.enumerated().reversed() {
                #expect(try reader.bytes(of: chunk, verify: true) == sample.chunkBytes(i))
            }
            #expect(try reader.withBytes(at: 0, size: 0) { $0.count } == 0)
            #expect(throws: FileError.self) { try reader.withBytes(at: 0, size: ChunkReader.maxReadSize + 1) { _ in } }
            // The reused buffer serves chunks of any size in any order.
            let sizes = try sample.manifest.chunks.map { c in try reader.withChunk(c, verify: true) { $0.count } }
            #expect(sizes == sample.manifest.chunks.map { Int($0.size) })
        }
    }

    @Test func detectsChangesOnDisk() throws {
        let sample = try Sample(count: 200_000, seed: 9)
        try withTemporaryDirectory { dir in
            var changed = sample.bytes
            changed[Int(sample.manifest.chunks[2].offset)] ^= 1
            try writeFile(dir + "/f", Array(changed.prefix(150_000)))
            let reader = try ChunkReader(path: dir + "/f")
            #expect(try reader.bytes(of: sample.manifest.chunks[2]) != sample.chunkBytes(2))   // without verify
            for (chunk, expectedKind) in [(sample.manifest.chunks[2], FileError.Kind.changedOnDisk),
                                          (sample.manifest.chunks.last!, FileError.Kind.changedOnDisk)] {
                #expect(thrownFileError("read a changed chunk") { try reader.withChunk(chunk, verify: true) { _ in } }?.kind == expectedKind)
            }
        }
    }

    @Test func refusesASymlinkByName() throws {
        try withTemporaryDirectory { dir in
            try writeFile(dir + "/real", [1, 2, 3])
            try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/real")
            let handle = try DirectoryHandle(path: dir)
            let reader = try ChunkReader(name: "real", in: handle)
            #expect(try reader.withBytes(at: 1, size: 2) { Array($0) } == [2, 3])
            #expect(thrownFileError("opened a symbolic link") { _ = try ChunkReader(name: "link", in: handle) }?.kind == .symlinkRefused)
        }
    }
}
