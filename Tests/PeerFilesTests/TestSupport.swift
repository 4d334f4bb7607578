import Foundation
import PeerFiles
import Testing
import TestKit


/// `count` pseudo-random bytes: SplitMix64(seed) outputs, each stored little-endian.
func pseudoRandomBytes(count: Int, seed: UInt64) -> [UInt8] {
    var rng = SplitMix64(seed: seed)
    var out = [UInt8](repeating: 0, count: count)
    out.withUnsafeMutableBytes { raw in
        var i = 0
        while i + 8 <= count {
            raw.storeBytes(of: rng.next().littleEndian, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        if i < count {
            let last = rng.next()
            for j in i..<count { raw[j] = UInt8(truncatingIfNeeded: last >> (UInt64(j - i) * 8)) }
        }
    }
    return out
}

/// A fresh directory under the system temporary directory, removed after `body`.
func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("peerfiles-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    return try body(dir.path)
}

/// Writes `bytes` to `path`.
func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

func readFile(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Chunk ranges (start, end) from end offsets.
func ranges(_ boundaries: [Int]) -> [Range<Int>] {
    var start = 0
    return boundaries.map { end in defer { start = end }; return start..<end }
}

/// Chunks of an in-memory buffer as `ChunkRef`s (the reference for the streaming chunker).
func referenceChunks(_ bytes: [UInt8], parameters: ChunkParameters) -> [ChunkRef] {
    ranges(Chunker.boundaries(in: bytes, parameters: parameters)).map { r in
        ChunkRef(offset: UInt64(r.lowerBound), size: UInt32(r.count), hash: ChunkHash.of(Array(bytes[r])))
    }
}

/// Benchmarks run only when asked: `SYNCPEER_BENCH=1 swift test -c release --filter Benchmark`.
let benchmarksEnabled = ProcessInfo.processInfo.environment["SYNCPEER_BENCH"] != nil

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    let elapsed = try clock.measure(body)
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// The `FileError` that `body` throws; records an issue (and returns nil) if it throws
/// nothing or another error.
func thrownFileError(_ unexpectedSuccess: String, sourceLocation: SourceLocation = #_sourceLocation,
                     _ body: () throws -> Void) -> FileError? {
    do {
        try body()
        Issue.record(Comment(rawValue: unexpectedSuccess), sourceLocation: sourceLocation)
    } catch let error as FileError {
        return error
    } catch {
        Issue.record(error, "expected a FileError", sourceLocation: sourceLocation)
    }
    return nil
}
