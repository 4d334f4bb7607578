import Glibc
@testable import PeerFiles
import Testing

/// A scan's chunkers take their read buffers from one pool (`ChunkBuffers`): the chunks are
/// exactly those of the pure function whatever a reused buffer held before, and a run of
/// small files allocates its buffers once, not twice per file.
@Suite struct ChunkBuffersTests {
    static let parameters = ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384)
    /// Sizes in an order that makes the pool reuse larger buffers and grow: 0, tiny, around
    /// the buffers' sizes, and up to 3 MiB (still read, not mapped).
    static let sizes = [70_000, 0, 1, 4_096, 300_000, 65_537, 3 << 20, 20_000, 1_000_000, 9]

    @Test(arguments: [(1, 64 << 10), (2, 64 << 10), (2, 1 << 20)])
    func pooledChunkingEqualsThePureFunction(threads: Int, blockSize: Int) throws {
        let pool = ChunkBuffers()
        try withTemporaryDirectory { dir in
            for (i, size) in Self.sizes.enumerated() {
                let data = pseudoRandomBytes(count: size, seed: UInt64(100 + i))
                let path = dir + "/f\(i)"
                try writeFile(path, data)
                let fd = open(path, O_RDONLY)
                defer { close(fd) }
                let chunker = FileChunker(fileDescriptor: fd, path: path, parameters: Self.parameters, readBlockSize: blockSize,
                                          hashThreads: threads, quickSums: true, buffers: pool)
                let expected = referenceChunks(data, parameters: Self.parameters)
                #expect(try chunker.allChunks() == expected, "file of \(size) bytes")
                #expect(chunker.sums == expected.map { chunk in
                    data.withUnsafeBytes { QuickSum.of(UnsafeRawBufferPointer(rebasing: $0[Int(chunk.offset)..<Int(chunk.end)])) }
                })
            }
        }
    }

    /// 30 small files scanned in turn: their chunkers share two buffers (one thread, no
    /// read-ahead), where each file allocated its own two before.
    @Test func smallFilesReuseTheSameBuffers() throws {
        let pool = ChunkBuffers()
        try withTemporaryDirectory { dir in
            for i in 0..<30 {
                let data = pseudoRandomBytes(count: 4_096 + i * 997, seed: UInt64(i))
                let path = dir + "/s\(i)"
                try writeFile(path, data)
                let fd = open(path, O_RDONLY)
                defer { close(fd) }
                let size = UInt64(data.count)
                let chunker = FileChunker(fileDescriptor: fd, path: path, parameters: ChunkParameters.forFileSize(size),
                                          readBlockSize: FolderScanner.readBlockSize(for: size), hashThreads: 1, buffers: pool)
                #expect(try chunker.allChunks() == referenceChunks(data, parameters: ChunkParameters.forFileSize(size)))
            }
        }
        #expect(pool.allocated == 2)
    }
}
