internal import Glibc
internal import Synchronization

/// A fast 128-bit checksum of a byte range, keyed with a random key drawn once per process:
/// what a node compares to learn that a range of one of its own files still holds the
/// bytes it hashed before, several times faster than the content hash. Never sent, never stored:
/// a sum means nothing to another process (other key), so a peer can neither see nor
/// aim for one. Not a cryptographic hash: only for telling a node's own unchanged ranges
/// from changed ones (`ChunkSums`), where a changed range is hashed with the content hash (BLAKE3) again.
///
/// Four lanes of 64-bit multiply–rotate rounds over 32-byte stripes (the structure of
/// xxHash64, with other constants and a keyed start), a tail of 8-byte words and bytes,
/// the length, and two different final mixes of the lanes.
package struct QuickSum: Hashable, Sendable {
    package let low: UInt64
    package let high: UInt64

    private static let key: (UInt64, UInt64, UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next(), generator.next(), generator.next())
    }()

    private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9

    @inline(__always) private static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x &<< r) | (x &>> (64 &- r)) }

    @inline(__always) private static func round(_ acc: UInt64, _ lane: UInt64) -> UInt64 {
        rotl(acc &+ lane &* prime2, 31) &* prime1
    }

    @inline(__always) private static func avalanche(_ x: UInt64) -> UInt64 {
        var h = x
        h ^= h &>> 33
        h &*= prime2
        h ^= h &>> 29
        h &*= prime3
        h ^= h &>> 32
        return h
    }

    package static func of(_ bytes: UnsafeRawBufferPointer) -> QuickSum {
        let key = Self.key
        var v0 = key.0, v1 = key.1, v2 = key.2, v3 = key.3
        let n = bytes.count
        var tail = UInt64(n) &* prime3 ^ key.0
        if let base = bytes.baseAddress {
            var i = 0
            while i &+ 32 <= n {
                v0 = round(v0, base.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                v1 = round(v1, base.loadUnaligned(fromByteOffset: i &+ 8, as: UInt64.self))
                v2 = round(v2, base.loadUnaligned(fromByteOffset: i &+ 16, as: UInt64.self))
                v3 = round(v3, base.loadUnaligned(fromByteOffset: i &+ 24, as: UInt64.self))
                i &+= 32
            }
            while i &+ 8 <= n {
                tail = rotl(tail ^ round(0, base.loadUnaligned(fromByteOffset: i, as: UInt64.self)), 27) &* prime1 &+ prime3
                i &+= 8
            }
            while i < n {
                tail = rotl(tail ^ UInt64(base.load(fromByteOffset: i, as: UInt8.self)) &* prime3, 11) &* prime1
                i &+= 1
            }
        }
        let low = avalanche(rotl(v0, 1) &+ rotl(v1, 7) &+ rotl(v2, 12) &+ rotl(v3, 18) ^ tail)
        let high = avalanche((v0 ^ rotl(v3, 29)) &* prime3 &+ (v1 ^ rotl(v2, 41)) &* prime1 &+ rotl(tail, 17))
        return QuickSum(low: low, high: high)
    }

    package static func of(_ bytes: [UInt8]) -> QuickSum { bytes.withUnsafeBytes { of($0) } }

    package init(low: UInt64, high: UInt64) {
        self.low = low
        self.high = high
    }
}

/// The quick sums of the chunks of one manifest of a file (same order), for re-chunking
/// it after a change without hashing its unchanged chunks again (`DeltaChunker`).
package struct ChunkSums: Sendable {
    /// The root hash of the manifest the sums belong to.
    package let rootHash: [UInt8]
    package let sums: [QuickSum]

    package init(rootHash: [UInt8], sums: [QuickSum]) {
        self.rootHash = rootHash
        self.sums = sums
    }
}

/// A folder's chunk sums of its large files, in memory only (a restarted node hashes a
/// changed file whole once, and has them again). Bounded: files of at least
/// `minimumFileSize` bytes, at most `capacity` of them (the oldest goes first), so
/// 16 bytes per chunk of at most that many files. Thread-safe.
package final class ChunkSumCache: Sendable {
    /// Smaller files are re-chunked whole (it costs little).
    package static let minimumFileSize: UInt64 = 16 << 20
    package let capacity: Int
    private let state = Mutex<(entries: [String: ChunkSums], order: [String])>(([:], []))

    package init(capacity: Int = 64) { self.capacity = max(1, capacity) }

    /// The sums recorded for `path`, if they belong to the manifest with `rootHash`.
    package func sums(for path: String, rootHash: [UInt8]) -> [QuickSum]? {
        state.withLock { state in
            guard let entry = state.entries[path], entry.rootHash == rootHash else { return nil }
            return entry.sums
        }
    }

    package func record(_ sums: ChunkSums, for path: String) {
        state.withLock { state in
            if state.entries.updateValue(sums, forKey: path) == nil { state.order.append(path) }
            while state.order.count > capacity {
                state.entries[state.order.removeFirst()] = nil
            }
        }
    }

    package func forget(_ path: String) {
        state.withLock { state in
            if state.entries.removeValue(forKey: path) != nil { state.order.removeAll { $0 == path } }
        }
    }

    package var count: Int { state.withLock { $0.entries.count } }
}
