internal import PeerCrypto

// Content-defined chunking: FastCDC (Xia et al., "FastCDC: a Fast and Efficient
// Content-Defined Chunking Approach for Data Deduplication", USENIX ATC 2016) with
// cut-point skipping (no cut before `minSize`) and normalized chunking level 2 (a
// stricter mask before the average size, a looser one after it).
//
// WIRE FORMAT: the gear table, the masks, the cut rule and `ChunkParameters.forFileSize`
// together decide where files are cut. Two peers reuse each other's chunks only if they
// cut identically, so any change here is a protocol change (bump the "v1" in the gear
// seed and in the manifest domain string). `ChunkerKnownAnswerTests` pins the result.

/// Sizes that steer the chunker. Every chunk but the last of a file is at least
/// `minSize + 1` and at most `maxSize` bytes long; the last one is whatever remains
/// (1 … `maxSize` bytes). Chunks average roughly `averageSize` bytes on random data.
package struct ChunkParameters: Sendable, Hashable, CustomStringConvertible {
    /// No cut is considered in the first `minSize` bytes of a chunk (cut-point skipping).
    package let minSize: Int
    /// The target average, a power of two; it decides the two masks.
    package let averageSize: Int
    /// A chunk is cut here at the latest.
    package let maxSize: Int

    /// Smallest and largest `averageSize` that `forFileSize` picks.
    package static let smallestAverage = 64 << 10   // 64 KiB
    package static let largestAverage = 4 << 20     // 4 MiB
    /// The file size is divided by this to get a first guess of the average chunk size.
    package static let targetChunkCount: UInt64 = 2_000
    /// The largest `maxSize` that `forFileSize` can produce (4 × 4 MiB = 16 MiB); a
    /// manifest with a larger chunk is refused (see `Manifest.maxChunkSize`).
    package static let largestMax = 4 * largestAverage

    /// Explicit parameters (for tests and tools). Requirements: `averageSize` is a power
    /// of two in 16 … 2^28, and 1 ≤ `minSize` ≤ `averageSize` ≤ `maxSize` ≤ 2^30.
    package init(minSize: Int, averageSize: Int, maxSize: Int) {
        precondition(averageSize >= 16 && averageSize <= 1 << 28 && averageSize & (averageSize - 1) == 0,
                     "ChunkParameters: averageSize must be a power of two in 16...2^28")
        precondition(minSize >= 1 && minSize <= averageSize && averageSize <= maxSize && maxSize <= 1 << 30,
                     "ChunkParameters: need 1 <= minSize <= averageSize <= maxSize <= 2^30")
        self.minSize = minSize
        self.averageSize = averageSize
        self.maxSize = maxSize
    }

    /// The parameters both peers use for a file of `size` bytes (part of the wire format):
    ///
    ///     average = clamp(nextPowerOfTwo(ceil(size / 2,000)), 64 KiB, 4 MiB)
    ///     min     = average / 4
    ///     max     = average * 4
    ///
    /// So a file has about 2,000 chunks or fewer: files up to ~128 MB use 64 KiB chunks,
    /// from ~8 GB on 4 MiB chunks are used (a 1 TB file has ~250,000 chunks).
    package static func forFileSize(_ size: UInt64) -> ChunkParameters {
        let guess = size / targetChunkCount + (size % targetChunkCount == 0 ? 0 : 1)
        var average = UInt64(smallestAverage)
        while average < guess && average < UInt64(largestAverage) { average <<= 1 }
        let avg = Int(average)
        return ChunkParameters(minSize: avg / 4, averageSize: avg, maxSize: avg * 4)
    }

    /// log2(averageSize).
    var averageBits: Int { averageSize.trailingZeroBitCount }
    /// Mask used before `averageSize`: log2(avg) + 2 one-bits at the top of the 64-bit
    /// gear fingerprint (cuts are 4× rarer than average).
    var strictMask: UInt64 { ~UInt64(0) << UInt64(64 - (averageBits + 2)) }
    /// Mask used from `averageSize` on: log2(avg) − 2 one-bits at the top (4× likelier).
    var looseMask: UInt64 { ~UInt64(0) << UInt64(64 - (averageBits - 2)) }

    package var description: String { "min \(minSize) avg \(averageSize) max \(maxSize)" }
}

/// FastCDC over memory. Pure functions; the streaming chunker over files is `FileChunker`.
package enum Chunker {
    /// The 256-entry gear table (part of the wire format):
    ///
    ///     gear[i] = UInt64 big-endian from BLAKE2b(ASCII "syncpeer-fastcdc-gear-v1" ‖ byte i,
    ///                                              digest length 8)
    ///
    /// i.e. an 8-byte BLAKE2b digest (digest length 8 is a BLAKE2b parameter, not a
    /// truncation of a longer digest) of the 24-byte seed string followed by the single
    /// byte i (0 … 255), read as a big-endian unsigned 64-bit integer.
    package static let gearTable: [UInt64] = (0..<256).map { i in
        var input = Array("syncpeer-fastcdc-gear-v1".utf8)
        input.append(UInt8(i))
        return BLAKE2b.hash(input, length: 8).reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
    }

    /// End offsets of the chunks of `buffer` (the last one is `buffer.count`); empty for
    /// an empty buffer. Chunk k spans `boundaries[k-1] ..< boundaries[k]` (from 0 for k = 0).
    package static func boundaries(in buffer: UnsafeRawBufferPointer, parameters: ChunkParameters) -> [Int] {
        var result: [Int] = []
        result.reserveCapacity(buffer.count / parameters.averageSize + 1)
        guard let base = buffer.baseAddress, buffer.count > 0 else { return result }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var offset = 0
        while offset < buffer.count {
            offset += cutLength(bytes + offset, count: buffer.count - offset, parameters: parameters)
            result.append(offset)
        }
        return result
    }

    /// End offsets of the chunks of `bytes` (convenience for tests and small inputs).
    package static func boundaries(in bytes: [UInt8], parameters: ChunkParameters) -> [Int] {
        bytes.withUnsafeBytes { boundaries(in: $0, parameters: parameters) }
    }

    /// Length of the first chunk of `count` bytes at `bytes`, treating the end of the
    /// input as the end of the file. Exactly the FastCDC cut:
    ///
    ///     if count <= min: return count
    ///     end = min(count, max); normal = min(avg, end); fp = 0
    ///     for i in min ..< end:
    ///         fp = (fp << 1) + gear[bytes[i]]             (wrapping, 64-bit)
    ///         mask = i < normal ? strictMask : looseMask
    ///         if fp & mask == 0: return i + 1             (byte i ends the chunk)
    ///     return end
    ///
    /// A caller streaming a file must only call it with `count >= maxSize` or at the end
    /// of the file, so that the result does not depend on how the file was read.
    package static func cutLength(_ bytes: UnsafePointer<UInt8>, count: Int, parameters: ChunkParameters) -> Int {
        let minSize = parameters.minSize
        if count <= minSize { return count }
        let end = Swift.min(count, parameters.maxSize)
        let normal = Swift.min(parameters.averageSize, end)
        let strict = parameters.strictMask
        let loose = parameters.looseMask
        return gearTable.withUnsafeBufferPointer { table -> Int in
            let gear = table.baseAddress!
            var fp: UInt64 = 0
            var i = minSize
            if let cut = scan(bytes, from: &i, to: normal, fingerprint: &fp, mask: strict, gear: gear) { return cut }
            if let cut = scan(bytes, from: &i, to: end, fingerprint: &fp, mask: loose, gear: gear) { return cut }
            return end
        }
    }

    /// The FastCDC loop of `cutLength` over bytes `i ..< limit` with one mask: the end of
    /// the first byte whose fingerprint has no bit of `mask` set, or nil with `i == limit`
    /// and `fp` the fingerprint after byte `limit - 1`.
    ///
    /// Eight bytes per step, same result as one byte at a time. The fingerprint after
    /// byte k of a step is `(fp << (k + 1)) + p_k`, where `p_k` sums the step's gear
    /// values shifted by their distance to byte k and does not depend on `fp`. So the only
    /// dependency carried from step to step is `fp = (fp << 8) + p_7`, one shift and add
    /// per eight bytes; the eight checks and the `p_k` of the next step run beside it.
    /// (Two bytes per step, the chain of the 2020 paper, measured 1.6–1.7 GB/s in memory;
    /// this form 2.1–2.3 GB/s.)
    @inline(__always)
    static func scan(_ bytes: UnsafePointer<UInt8>, from i: inout Int, to limit: Int,
                     fingerprint fp: inout UInt64, mask: UInt64, gear: UnsafePointer<UInt64>) -> Int? {
        var f = fp
        var at = i
        while at &+ 8 <= limit {
            let g0 = gear[Int(bytes[at])]
            let g1 = gear[Int(bytes[at &+ 1])]
            let g2 = gear[Int(bytes[at &+ 2])]
            let g3 = gear[Int(bytes[at &+ 3])]
            let g4 = gear[Int(bytes[at &+ 4])]
            let g5 = gear[Int(bytes[at &+ 5])]
            let g6 = gear[Int(bytes[at &+ 6])]
            let g7 = gear[Int(bytes[at &+ 7])]
            let p1 = (g0 &<< 1) &+ g1
            let p3 = (p1 &<< 2) &+ ((g2 &<< 1) &+ g3)
            let p5 = (p3 &<< 2) &+ ((g4 &<< 1) &+ g5)
            let p7 = (p5 &<< 2) &+ ((g6 &<< 1) &+ g7)
            let f7 = (f &<< 8) &+ p7
            if ((f &<< 1) &+ g0) & mask == 0
                || ((f &<< 2) &+ p1) & mask == 0
                || ((f &<< 3) &+ ((p1 &<< 1) &+ g2)) & mask == 0
                || ((f &<< 4) &+ p3) & mask == 0
                || ((f &<< 5) &+ ((p3 &<< 1) &+ g4)) & mask == 0
                || ((f &<< 6) &+ p5) & mask == 0
                || ((f &<< 7) &+ ((p5 &<< 1) &+ g6)) & mask == 0
                || f7 & mask == 0 {
                break  // a cut in these eight bytes: found below, one byte at a time
            }
            f = f7
            at &+= 8
        }
        while at < limit {
            f = (f &<< 1) &+ gear[Int(bytes[at])]
            at &+= 1
            if f & mask == 0 { return at }
        }
        fp = f
        i = at
        return nil
    }
}
