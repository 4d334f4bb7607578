import Foundation
import PeerCrypto
import PeerFiles
import Testing

/// Throughput of chunking + hashing over 512 MiB. Prints figures, never asserts on time
/// (this machine is shared and noisy). Run in a release build:
///
///     swift build -c release -Xswiftc -enable-testing --build-tests
///     SYNCPEER_BENCH=1 swift test -c release -Xswiftc -enable-testing --skip-build --filter ChunkerBenchmark
///
/// (`-enable-testing` only because other test targets use `@testable import`.) Each line
/// gives the best and median wall-clock rate of several runs, and the CPU time used per
/// GB (user + system, all threads): on a busy machine the CPU figure is the stable one.
@Suite(.serialized, .enabled(if: benchmarksEnabled)) struct ChunkerBenchmark {
    static let size = 512 << 20
    static let runs = 5

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue &* 1, &usage)
        func s(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return s(usage.ru_utime) + s(usage.ru_stime)
    }

    static func report(_ label: String, _ body: () throws -> Void) rethrows {
        var rates: [Double] = []
        var cpu: [Double] = []
        for _ in 0..<runs {
            let c0 = cpuSeconds()
            let t = try seconds(body)
            cpu.append(cpuSeconds() - c0)
            rates.append(Double(size) / 1e6 / t)
        }
        rates.sort()
        cpu.sort()
        let cpuPerGB = cpu[runs / 2] / (Double(size) / 1e9)
        print("[bench] \(label): best \(Int(rates.last!)) MB/s, median \(Int(rates[runs / 2])) MB/s, CPU \(String(format: "%.2f", cpuPerGB)) s/GB")
    }

    @Test func throughput() throws {
        let data = pseudoRandomBytes(count: Self.size, seed: 42)
        let params = ChunkParameters.forFileSize(UInt64(Self.size))
        let boundaries = data.withUnsafeBytes { Chunker.boundaries(in: $0, parameters: params) }
        print("[bench] 512 MiB of pseudo-random data, \(params), \(boundaries.count) chunks")
        Self.report("FastCDC boundaries only, in memory") {
            _ = data.withUnsafeBytes { Chunker.boundaries(in: $0, parameters: params) }
        }
        Self.report("BLAKE2b-256 of the chunks only, in memory, 1 thread") {
            data.withUnsafeBytes { raw in
                for r in ranges(boundaries) { _ = ChunkHash.of(UnsafeRawBufferPointer(rebasing: raw[r])) }
            }
        }
        try withTemporaryDirectory { dir in
            let path = dir + "/big"
            try writeFile(path, data)
            for threads in [1, 2] {
                try Self.report("FileChunker chunk + hash, file in page cache, hashThreads \(threads)") {
                    let chunker = try FileChunker(path: path, hashThreads: threads)
                    var count = 0
                    while try chunker.next() != nil { count += 1 }
                    precondition(count == boundaries.count)
                }
            }
        }
    }
}
