import Foundation
import PeerCrypto
import PeerFiles
import Testing

/// Throughput of chunking + hashing. Prints figures, never asserts on time (this machine
/// is shared and noisy). Run in release:
///
///     SYNCPEER_BENCH=1 swift test -c release --filter ChunkerBenchmark
@Suite(.serialized, .enabled(if: benchmarksEnabled)) struct ChunkerBenchmark {
    static let size = 512 << 20

    @Test func throughput() throws {
        let data = pseudoRandomBytes(count: Self.size, seed: 42)
        let params = ChunkParameters.forFileSize(UInt64(Self.size))
        let mb = Double(Self.size) / 1e6
        var boundaries: [Int] = []
        let tCut = seconds { boundaries = data.withUnsafeBytes { Chunker.boundaries(in: $0, parameters: params) } }
        var sink: UInt8 = 0
        let tHash = seconds {
            data.withUnsafeBytes { raw in
                for r in ranges(boundaries) { sink ^= ChunkHash.of(UnsafeRawBufferPointer(rebasing: raw[r])).bytes[0] }
            }
        }
        print("[bench] \(params), \(boundaries.count) chunks of 512 MiB")
        print("[bench] FastCDC boundaries only (memory):  \(Int(mb / tCut)) MB/s")
        print("[bench] BLAKE2b-256 of the chunks (1 thread): \(Int(mb / tHash)) MB/s  (\(sink))")

        try withTemporaryDirectory { dir in
            let path = dir + "/big"
            try writeFile(path, data)
            for threads in [1, 2] {
                for _ in 0..<2 {
                    var count = 0
                    let t = try seconds {
                        let chunker = try FileChunker(path: path, hashThreads: threads)
                        while try chunker.next() != nil { count += 1 }
                    }
                    print("[bench] FileChunker chunk+hash, file in page cache, \(threads) hash thread(s): \(Int(mb / t)) MB/s (\(count) chunks)")
                }
            }
        }
    }
}
