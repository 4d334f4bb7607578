internal import CBLAKE3
#if canImport(Glibc)
internal import Glibc
#endif

/// BLAKE3 (O'Connor, Aumasson, Neves, Wilcox-O'Hearn, 2020) in its hash mode with 32-byte
/// digests, our own code: the tree here, the compression function in C (CBLAKE3). Inputs are
/// cut into 1 KiB chunks that form a binary tree; the chunks of a subtree are compressed side
/// by side in SIMD lanes: 16 with AVX-512, 8 with AVX2, else 4 (SSE2, every x86-64), picked
/// once from the CPU's features (`lanes`). The C kernels carry their instruction sets as
/// function attributes, so no target needs compiler flags (the package stays one others can
/// depend on by version).
/// Known answers: the BLAKE3 team's test vectors (`BLAKE3Tests`). Chaining values are kept
/// as native words and read back as little-endian ones: little-endian hosts only (x86-64,
/// arm64).
package enum BLAKE3 {
    package static let digestLength = 32
    static let chunkLength = 1024
    /// Largest subtree compressed in one go (chunks): its chaining values take 48 KiB of
    /// temporary memory (on the heap: this toolchain's runtime never grants more than 1 KiB
    /// of stack to `withUnsafeTemporaryAllocation`).
    static let largestSubtree = 1024

    static let chunkStart: UInt32 = 1, chunkEnd: UInt32 = 2, parent: UInt32 = 4, root: UInt32 = 8
    static let iv: [UInt32] = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19]

    /// Digest of one input.
    package static func hash(_ data: some ContiguousBytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: digestLength)
        data.withUnsafeBytes { input in out.withUnsafeMutableBytes { hash(input, into: $0.baseAddress!) } }
        return out
    }

    /// Digest of `data` written at `out` (32 bytes).
    package static func hash(_ data: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer) {
        hash(data, into: out, widest: lanes)
    }

    /// Inputs up to this size (the largest chunk a manifest may name) are hashed in one pass
    /// over the whole tree (`hash(_:into:widest:)`); longer ones stream through `Hasher`.
    static let oneShotLimit = 16 << 20

    /// The one-shot digest with at most `widest` lanes (4, 8 or 16; tests pass each).
    ///
    /// Every chunk's chaining value first, full chunks `widest` at a time (a 4 KiB input is
    /// one 4-lane pass), then the tree level by level, parents side by side, an odd last
    /// node carried up unchanged: that is BLAKE3's tree (each left subtree the largest power
    /// of two of chunks below the count). `Hasher` keeps the last chunk back in case more
    /// input follows, so it ran the tail of every input (all of one up to 4 KiB) one chunk
    /// at a time; here nothing waits. The chaining values take 48 bytes per chunk (on the
    /// stack up to 20 chunks, the runtime's 1 KiB; one allocation above).
    static func hash(_ data: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer, widest: Int) {
        let n = data.count
        guard n <= oneShotLimit else {
            var hasher = Hasher(lanes: widest)
            hasher.update(data)
            hasher.finalize(into: out)
            return
        }
        let p = data.baseAddress ?? UnsafeRawPointer(bitPattern: 8)!
        let chunks = max(1, (n + chunkLength - 1) / chunkLength)
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: chunks * 8 + chunks * 4 + 8) { space in
            var level = space.baseAddress!
            guard chunks > 1 else {
                chunk(p, count: n, counter: 0, lastFlags: root, out: level)
                storeDigest(level, to: out)
                return
            }
            var next = level + chunks * 8
            // A partial last chunk (never the root here: at least two chunks) on its own.
            let full = n % chunkLength == 0 ? chunks : chunks - 1
            chunkValues(p, chunks: full, counter: 0, widest: widest, out: level)
            if full < chunks {
                chunk(p + full * chunkLength, count: n - full * chunkLength, counter: UInt64(full), lastFlags: 0, out: level + 8 * full)
            }
            var count = chunks
            while count > 2 {
                count = parentValues(level, count: count, widest: widest, out: next)
                swap(&level, &next)
            }
            parentNode(level, flags: root, out: next)
            storeDigest(next, to: out)
        }
    }

    /// The digest: the root's first 8 output words, little-endian.
    static func storeDigest(_ cv: UnsafePointer<UInt32>, to out: UnsafeMutableRawPointer) {
        for i in 0..<8 { out.storeBytes(of: cv[i].littleEndian, toByteOffset: 4 * i, as: UInt32.self) }
    }

    /// The widest lane count this process uses: 16 with AVX-512 (F and VL), 8 with AVX2, else
    /// 4, as CPUID reports and the OS enables (`cblake3_widest`). The environment variable
    /// SYNCPEER_BLAKE3_LANES (4, 8 or 16) lowers it, for tests and measurements.
    package static let lanes: Int = {
        var widest = Int(cblake3_widest())
        if let text = getenv("SYNCPEER_BLAKE3_LANES"), let asked = Int(String(cString: text)), [4, 8, 16].contains(asked) {
            widest = min(widest, asked)
        }
        return widest
    }()

    /// Compresses `blocks` blocks of `width` inputs side by side (see `cblake3_compress_lanes`).
    static func compressLanes(width: Int, _ p: UnsafeRawPointer, stride: Int, blocks: Int, key: UnsafePointer<UInt32>,
                              counter: UInt64, counterStep: UInt64, flags: UInt32, firstFlags: UInt32, lastFlags: UInt32,
                              out: UnsafeMutablePointer<UInt32>) {
        cblake3_compress_lanes(Int32(width), p, stride, blocks, key, counter, counterStep,
                               flags, firstFlags, lastFlags, out)
    }

    /// The widest lane count ≤ `count` this process uses, or 1 (one input at a time).
    static func width(for count: Int, widest: Int) -> Int {
        var width = widest
        while width > count && width > 4 { width >>= 1 }
        return width <= count ? width : 1
    }

    /// One compression of one input: `cv` (8 words) is updated in place from the 64 bytes at
    /// `block` (already padded with zeros past `length`).
    static func compress(_ cv: UnsafeMutablePointer<UInt32>, block: UnsafeRawPointer, length: Int, counter: UInt64, flags: UInt32) {
        cblake3_compress(cv, block, UInt32(length), counter, flags)
    }

    /// Chaining value (or, with `lastFlags` = root, the digest) of chunk number `counter`:
    /// `count` bytes at `p`, 0 … 1024 (0 only for the empty input), one block at a time.
    static func chunk(_ p: UnsafeRawPointer, count: Int, counter: UInt64, lastFlags: UInt32, out: UnsafeMutablePointer<UInt32>) {
        for i in 0..<8 { out[i] = iv[i] }
        let blocks = max(1, (count + 63) / 64)
        withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { padded in
            for b in 0..<blocks {
                let length = min(64, count - b * 64)
                let flags = (b == 0 ? chunkStart : 0) | (b == blocks - 1 ? chunkEnd | lastFlags : 0)
                var block = UnsafeRawPointer(padded.baseAddress!)
                if length == 64 {
                    block = p + b * 64
                } else {
                    padded.initializeMemory(as: UInt8.self, repeating: 0)
                    if length > 0 { padded.baseAddress!.copyMemory(from: p + b * 64, byteCount: length) }
                }
                compress(out, block: block, length: length, counter: counter, flags: flags)
            }
        }
    }

    /// The parent node of two chaining values, 16 contiguous words at `children`.
    static func parentNode(_ children: UnsafeRawPointer, flags: UInt32, out: UnsafeMutablePointer<UInt32>) {
        for i in 0..<8 { out[i] = iv[i] }
        compress(out, block: children, length: 64, counter: 0, flags: parent | flags)
    }

    /// Chaining value of the full subtree of `chunks` chunks (a power of two, 1 … 1024) at
    /// `p`, the first being chunk number `counter`. Never the root: at least one more chunk
    /// follows it. Chunks, then each level of parents, are compressed `lanes` at a time.
    static func subtree(_ p: UnsafeRawPointer, chunks: Int, counter: UInt64, widest: Int, out: UnsafeMutablePointer<UInt32>) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: chunks * 8 + chunks * 4 + 8) { space in
            var level = space.baseAddress!
            var next = level + chunks * 8
            chunkValues(p, chunks: chunks, counter: counter, widest: widest, out: level)
            var count = chunks
            while count > 1 {
                count = parentValues(level, count: count, widest: widest, out: next)
                swap(&level, &next)
            }
            out.update(from: level, count: 8)
        }
    }

    /// Chaining values of `chunks` full chunks at `p` (none of them the root), the first being
    /// chunk number `counter`, `widest` (or fewer) at a time: 8 words each at `out`.
    static func chunkValues(_ p: UnsafeRawPointer, chunks: Int, counter: UInt64, widest: Int, out: UnsafeMutablePointer<UInt32>) {
        iv.withUnsafeBufferPointer { key in
            var i = 0
            while i < chunks {
                let width = width(for: chunks - i, widest: widest)
                if width == 1 {
                    chunk(p + i * chunkLength, count: chunkLength, counter: counter + UInt64(i), lastFlags: 0, out: out + 8 * i)
                } else {
                    compressLanes(width: width, p + i * chunkLength, stride: chunkLength, blocks: 16, key: key.baseAddress!,
                                  counter: counter + UInt64(i), counterStep: 1, flags: 0, firstFlags: chunkStart,
                                  lastFlags: chunkEnd, out: out + 8 * i)
                }
                i += width
            }
        }
    }

    /// One level of the tree: the parents (never the root) of the `count` chaining values at
    /// `level`, side by side, at `out`; an odd last value is carried up unchanged (a left
    /// subtree is always the largest power of two below the count, so that is BLAKE3's tree).
    /// Returns the count at `out`, (count + 1) / 2.
    static func parentValues(_ level: UnsafePointer<UInt32>, count: Int, widest: Int, out: UnsafeMutablePointer<UInt32>) -> Int {
        let pairs = count / 2
        iv.withUnsafeBufferPointer { key in
            var i = 0
            while i < pairs {
                let width = width(for: pairs - i, widest: widest)
                if width == 1 {
                    parentNode(level + 16 * i, flags: 0, out: out + 8 * i)
                } else {
                    compressLanes(width: width, level + 16 * i, stride: 64, blocks: 1, key: key.baseAddress!,
                                  counter: 0, counterStep: 0, flags: parent, firstFlags: 0, lastFlags: 0, out: out + 8 * i)
                }
                i += width
            }
        }
        if count % 2 == 1 { (out + 8 * pairs).update(from: level + 8 * (count - 1), count: 8) }
        return pairs + count % 2
    }

    /// Streaming BLAKE3. Keeps the current chunk (≤ 1 KiB) and one chaining value per level
    /// of the tree (≤ 54 for 2^64 bytes); a long input is hashed straight from the caller's
    /// memory in subtrees of up to 1,024 chunks.
    package struct Hasher: Sendable {
        /// Chaining values of finished subtrees, 8 words each, largest (leftmost) first.
        private var stack: [UInt32] = []
        /// The bytes of the chunk after the pushed ones: 1 … 1,024, or none yet.
        private var current: [UInt8] = []
        /// Chunks in the pushed subtrees.
        private var counter: UInt64 = 0
        private let widest: Int

        package init() { widest = BLAKE3.lanes }

        /// At most `lanes` lanes (4, 8 or 16; never more than `BLAKE3.lanes`): for tests.
        init(lanes: Int) { widest = min(lanes, BLAKE3.lanes) }

        package mutating func update(_ data: some ContiguousBytes) {
            data.withUnsafeBytes { update($0) }
        }

        package mutating func update(_ buffer: UnsafeRawBufferPointer) {
            guard var p = buffer.baseAddress, buffer.count > 0 else { return }
            var n = buffer.count
            if !current.isEmpty {
                let take = min(chunkLength - current.count, n)
                current.append(contentsOf: UnsafeRawBufferPointer(start: p, count: take))
                p += take
                n -= take
                if n == 0 { return }
                // The chunk is full and more follows: it is not the last one.
                var cv = [UInt32](repeating: 0, count: 8)
                current.withUnsafeBytes { chunk($0.baseAddress!, count: chunkLength, counter: counter, lastFlags: 0, out: &cv) }
                push(cv, chunks: 1)
                current.removeAll(keepingCapacity: true)
            }
            // Whole subtrees while more than a chunk remains, so the last chunk (which may be
            // the root) is always kept in `current`.
            while n > chunkLength {
                var chunks = min(largestSubtree, 1 << (Int.bitWidth - 1 - ((n - 1) / chunkLength).leadingZeroBitCount))
                while counter % UInt64(chunks) != 0 { chunks >>= 1 }
                var cv = [UInt32](repeating: 0, count: 8)
                subtree(p, chunks: chunks, counter: counter, widest: widest, out: &cv)
                push(cv, chunks: chunks)
                p += chunks * chunkLength
                n -= chunks * chunkLength
            }
            current.append(contentsOf: UnsafeRawBufferPointer(start: p, count: n))
        }

        /// Pushes the chaining value of the next `chunks` chunks (never the last ones).
        private mutating func push(_ cv: [UInt32], chunks: Int) {
            mergeStack()
            stack.append(contentsOf: cv)
            counter += UInt64(chunks)
        }

        /// Merges the tree lazily, once more input is known to follow what the stack holds:
        /// down to one value per one-bit of `counter` (the complete subtrees to the left of
        /// what follows); so no merge is ever the root.
        private mutating func mergeStack() {
            while stack.count / 8 > counter.nonzeroBitCount {
                let top = stack.count - 16
                var merged = [UInt32](repeating: 0, count: 8)
                stack.withUnsafeBufferPointer { parentNode(UnsafeRawPointer($0.baseAddress! + top), flags: 0, out: &merged) }
                stack.removeLast(16)
                stack.append(contentsOf: merged)
            }
        }

        /// The 32-byte digest. The hasher may not be updated afterwards.
        package mutating func finalize() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: digestLength)
            out.withUnsafeMutableBytes { finalize(into: $0.baseAddress!) }
            return out
        }

        /// The digest written at `out` (32 bytes).
        package mutating func finalize(into out: UnsafeMutableRawPointer) {
            // The last chunk (in `current`, never empty after a pushed one) follows the stack.
            mergeStack()
            var cv = [UInt32](repeating: 0, count: 8)
            current.withUnsafeBytes { bytes in
                chunk(bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 8)!, count: bytes.count, counter: counter,
                      lastFlags: counter == 0 ? root : 0, out: &cv)
            }
            // Right to left: each pushed subtree is the left sibling of what follows it.
            var level = stack.count / 8
            var pair = [UInt32](repeating: 0, count: 16)
            while level > 0 {
                level -= 1
                for i in 0..<8 { pair[i] = stack[8 * level + i]; pair[8 + i] = cv[i] }
                pair.withUnsafeBytes { parentNode($0.baseAddress!, flags: level == 0 ? root : 0, out: &cv) }
            }
            cv.withUnsafeBufferPointer { storeDigest($0.baseAddress!, to: out) }
        }
    }
}
