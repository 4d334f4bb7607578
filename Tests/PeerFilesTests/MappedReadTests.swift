import Glibc
@testable import PeerFiles
import Testing

/// Large files are cut, hashed and sent straight from the page cache (mapped windows). The
/// chunks must be exactly those of the pure function, and a file that shrinks while it is
/// mapped must be reported as changed, not kill the process (SIGBUS).
@Suite(.serialized) struct MappedReadTests {
    /// 5 MiB and a bit: above `MappedChunker.smallestFile`, so `FileChunker` maps it.
    static let data = pseudoRandomBytes(count: (5 << 20) + 4_099, seed: 43)

    @Test(arguments: [65_536, 1 << 20, 8 << 20], [1, 2])
    func mappedChunkingEqualsThePureFunction(blockSize: Int, threads: Int) throws {
        let parameters = ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384)
        let expected = referenceChunks(Self.data, parameters: parameters)
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try writeFile(path, Self.data)
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            #expect(MappedChunker.suits(fd))
            let chunker = FileChunker(fileDescriptor: fd, path: path, parameters: parameters, readBlockSize: blockSize,
                                      hashThreads: threads, quickSums: true)
            let chunks = try chunker.allChunks()
            #expect(chunks == expected)
            #expect(chunker.bytesChunked == UInt64(Self.data.count))
            #expect(chunker.sums == expected.map { chunk in
                Self.data.withUnsafeBytes { QuickSum.of(UnsafeRawBufferPointer(rebasing: $0[Int(chunk.offset)..<Int(chunk.end)])) }
            })
            #expect(try chunker.next() == nil)
        }
    }

    /// With every slot of the guard taken (many windows held elsewhere), a large file is
    /// still chunked, its windows read instead of mapped, into the same chunks; a reader lets
    /// its window go once read to its end (a sent file holds no slot).
    @Test func withEveryWindowSlotTakenWindowsAreReadInstead() throws {
        let parameters = ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384)
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try writeFile(path, Self.data)
            let reader = try ChunkReader(path: path)
            _ = try reader.withMappedBytes(at: UInt64(Self.data.count - 100), count: 100) { _ in 0 }
            var taken: [Int] = []
            while let slot = SignalGuard.acquire() { taken.append(slot) }
            defer { for slot in taken { SignalGuard.release(slot) } }
            #expect(!reader.holdsWindow, "a window read to the file's end is let go")
            // (Other suites may give slots back meanwhile: then some windows are mapped, the
            // chunks are the same.)
            let chunker = try FileChunker(path: path, parameters: parameters, readBlockSize: 1 << 20, hashThreads: 2)
            #expect(try chunker.allChunks() == referenceChunks(Self.data, parameters: parameters))
        }
    }

    /// The file is cut short while a window of it is read: the reader gets zeros where the
    /// file ended (not SIGBUS, which would end the process) and the read throws
    /// `changedOnDisk`; the next read maps what the file holds now.
    @Test func aFileCutShortWhileMappedIsReportedAsChanged() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try writeFile(path, Self.data)
            let reader = try ChunkReader(path: path)
            var touched = 0
            #expect(throws: FileError.self) {
                do {
                    _ = try reader.withMappedBytes(at: 0, count: 4 << 20) { bytes in
                        #expect(truncate(path, 1 << 20) == 0)
                        var sum: UInt64 = 0
                        for page in stride(from: 0, to: bytes.count, by: 4_096) { sum &+= UInt64(bytes[page]) }
                        touched = bytes.count
                        return sum
                    }
                } catch let error as FileError {
                    #expect(error.kind == .changedOnDisk, "\(error)")
                    throw error
                }
            }
            #expect(touched == 4 << 20, "every page was read, those past the new end as zeros")
            let again = try reader.withMappedBytes(at: 4_096, count: 8) { Array($0) }
            #expect(again == Array(Self.data[4_096..<4_104]))
            #expect(try reader.withMappedBytes(at: 0, count: 2 << 20) { _ in 0 } == nil, "past the end now: not mapped")
        }
    }

    /// Windows are mapped once for many chunks and follow the reads; what they lend is the
    /// file's bytes.
    @Test func mappedBytesAreTheFilesBytes() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try writeFile(path, Self.data)
            let reader = try ChunkReader(path: path)
            for (offset, count) in [(0, 1), (4_095, 70_000), (4 << 20, 1 << 20), (Self.data.count - 5, 5)] {
                let bytes = try reader.withMappedBytes(at: UInt64(offset), count: count) { Array($0) }
                #expect(bytes == Array(Self.data[offset..<(offset + count)]), "\(offset) + \(count)")
            }
        }
    }
}
