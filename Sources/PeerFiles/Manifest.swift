internal import PeerCrypto

/// A BLAKE3 digest (the content hash since protocol version 4; SHA-256 in version 3,
/// BLAKE2b-256 before) held inline (four words,
/// no heap allocation), so that manifests of a million chunks stay compact and hashes can
/// be dictionary keys (chunk reuse).
/// The bytes keep their order: `bytes` returns exactly the 32 digest bytes.
package struct ChunkHash: Sendable, Hashable, Comparable, CustomStringConvertible {
    package static let byteCount = 32
    // Big-endian words of the digest: w0 holds bytes 0…7, etc.
    private var w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64

    /// From exactly 32 bytes; nil otherwise.
    package init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.byteCount else { return nil }
        self.init(bytes: Array(bytes))
    }

    /// From exactly 32 bytes; nil otherwise. Read as four words: the generic walk over the
    /// bytes one by one cost 5 % of a sender's CPU in workload B (unspecialized, with
    /// metadata lookups per element).
    package init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self = bytes.withUnsafeBytes { ChunkHash(pointer: $0.baseAddress!) }
    }

    /// From 32 bytes at `pointer` (no checks; for decoders and hot loops).
    init(pointer: UnsafeRawPointer) {
        func word(_ i: Int) -> UInt64 { UInt64(bigEndian: pointer.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) }
        (w0, w1, w2, w3) = (word(0), word(1), word(2), word(3))
    }

    /// BLAKE3 of `data` (hash mode, 32 bytes; `PeerCrypto.BLAKE3`, the 1 KiB pieces of its
    /// tree side by side in SIMD lanes). Chosen by measurement, `syncpeer-bench crypto` on
    /// the build machine, 1 MiB inputs: 0.20 CPU-s per GB at 16 lanes (AVX-512), 0.38 at 8
    /// (AVX2), 0.83 at 4 (SSE2), against SHA-256's 0.69 (libcrypto, SHA-NI) and BLAKE2b-256's
    /// 1.2 (libsodium); 4 KiB inputs (a small file's one chunk) 0.78 against SHA-256's 0.81.
    /// Each byte of a transfer is hashed by both ends.
    package static func of(_ data: UnsafeRawBufferPointer) -> ChunkHash {
        withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 8) { out in
            BLAKE3.hash(data, into: out.baseAddress!)
            return ChunkHash(pointer: UnsafeRawPointer(out.baseAddress!))
        }
    }

    /// BLAKE3 of `data`.
    package static func of(_ data: [UInt8]) -> ChunkHash {
        data.withUnsafeBytes { of($0) }
    }

    /// The 32 digest bytes.
    package var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.byteCount)
        out.withUnsafeMutableBytes { write(to: $0.baseAddress!) }
        return out
    }

    /// Writes the 32 bytes at `pointer`.
    func write(to pointer: UnsafeMutableRawPointer) {
        for (i, w) in [w0, w1, w2, w3].enumerated() {
            pointer.storeBytes(of: w.bigEndian, toByteOffset: i * 8, as: UInt64.self)
        }
    }

    package static func < (a: ChunkHash, b: ChunkHash) -> Bool {
        (a.w0, a.w1, a.w2, a.w3) < (b.w0, b.w1, b.w2, b.w3)
    }

    /// Lowercase hex.
    package var description: String {
        [w0, w1, w2, w3].map { w in
            let hex = String(w, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }
}

/// One chunk of a file: where it is, how long it is and what it contains.
package struct ChunkRef: Sendable, Hashable, CustomStringConvertible {
    /// Byte offset in the file.
    package var offset: UInt64
    /// Length in bytes (1 … `Manifest.maxChunkSize`).
    package var size: UInt32
    /// BLAKE3 of the chunk's bytes (`ChunkHash.of`).
    package var hash: ChunkHash

    package init(offset: UInt64, size: UInt32, hash: ChunkHash) {
        self.offset = offset
        self.size = size
        self.hash = hash
    }

    /// One past the last byte.
    package var end: UInt64 { offset + UInt64(size) }

    package var description: String { "[\(offset) +\(size) \(String(hash.description.prefix(16)))…]" }
}

/// Why a manifest was refused. Each case names the rule that was broken.
package enum ManifestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input ends before the fixed header (or the announced chunk list) is complete.
    case truncated(needed: Int, available: Int)
    /// The first four bytes are not "SPM1".
    case badMagic
    /// More chunks than `Manifest.maxChunks`, checked before anything is allocated.
    case tooManyChunks(count: UInt64, limit: Int)
    /// The input is longer than the announced chunk count implies.
    case trailingBytes(count: Int)
    /// A chunk of size 0 or above `Manifest.maxChunkSize`.
    case chunkSizeOutOfRange(index: Int, size: UInt64)
    /// The chunk sizes do not add up to the file size.
    case sizeMismatch(sumOfChunks: UInt64, fileSize: UInt64)
    /// Chunks are not contiguous from offset 0 (only for manifests built from parts).
    case notContiguous(index: Int, offset: UInt64, expected: UInt64)
    /// The root hash in the encoding is not the one computed from the chunks.
    case rootHashMismatch

    package var description: String {
        switch self {
        case let .truncated(needed, available):
            return "manifest truncated: needs \(needed) bytes, has \(available)"
        case .badMagic:
            return "not a manifest: it does not start with \"SPM1\""
        case let .tooManyChunks(count, limit):
            return "manifest announces \(count) chunks; at most \(limit) are accepted"
        case let .trailingBytes(count):
            return "manifest has \(count) unexpected bytes after its chunk list and root hash"
        case let .chunkSizeOutOfRange(index, size):
            return "manifest chunk \(index) has size \(size); chunk sizes must be 1...\(Manifest.maxChunkSize)"
        case let .sizeMismatch(sum, fileSize):
            return "manifest chunk sizes add up to \(sum) bytes but the file size is \(fileSize)"
        case let .notContiguous(index, offset, expected):
            return "manifest chunk \(index) starts at \(offset), expected \(expected) (chunks must be contiguous from 0)"
        case .rootHashMismatch:
            return "manifest root hash does not match its chunks"
        }
    }
}

/// The list of chunks of a file and the root hash that names its content. This is what
/// travels in a transfer offer.
///
/// Root hash (wire format):
///
///     root = BLAKE3( "syncpeer-manifest-v3"                (20 ASCII bytes)
///                        ‖ fileSize                         (u64 big-endian)
///                        ‖ for each chunk: size (u32 BE) ‖ hash (32 bytes) )
///
/// BLAKE3 in hash mode, 32-byte output. Offsets are not hashed: they follow from the sizes
/// (chunks are contiguous from 0). An empty file has no chunks and root =
/// BLAKE3("syncpeer-manifest-v3" ‖ 0 as u64). (Protocol version 3 used SHA-256 and the
/// domain "syncpeer-manifest-v2", version 2 BLAKE2b-256 and "syncpeer-manifest-v1", for
/// the chunks too.)
///
/// Encoding (wire format), all integers big-endian:
///
///     "SPM1" (4 bytes) ‖ fileSize u64 ‖ chunkCount u32
///     ‖ chunkCount × (size u32 ‖ hash 32 bytes) ‖ rootHash 32 bytes
///
/// i.e. 48 + 36 × chunkCount bytes. The decoder checks the count against `maxChunks` and
/// the input length before allocating, then every size (1 … `maxChunkSize`), the sum of
/// sizes against the file size and the root hash.
package struct Manifest: Sendable, Equatable {
    package let fileSize: UInt64
    package let chunks: [ChunkRef]
    /// 32 bytes; see the type's documentation.
    package let rootHash: [UInt8]

    /// Most chunks a manifest may have (2^20): 48 + 36 × 2^20 ≈ 36 MiB encoded at most.
    /// With `ChunkParameters.forFileSize` that is files of about 4 TiB.
    package static let maxChunks = 1 << 20
    /// Largest chunk a manifest may name: the largest `maxSize` of `forFileSize` (16 MiB).
    /// It bounds the memory a receiver needs to verify one chunk.
    package static let maxChunkSize = ChunkParameters.largestMax
    static let magic: [UInt8] = Array("SPM1".utf8)
    static let domain: [UInt8] = Array("syncpeer-manifest-v3".utf8)
    static let headerSize = 16
    static let entrySize = 4 + ChunkHash.byteCount

    /// A manifest from chunks, checking the rules the decoder checks (contiguous from 0,
    /// sizes 1 … `maxChunkSize`, sum = `fileSize`, at most `maxChunks`) and computing the root.
    package init(fileSize: UInt64, chunks: [ChunkRef]) throws(ManifestError) {
        guard chunks.count <= Self.maxChunks else {
            throw .tooManyChunks(count: UInt64(chunks.count), limit: Self.maxChunks)
        }
        var expected: UInt64 = 0
        for (i, c) in chunks.enumerated() {
            guard c.size >= 1 && Int(c.size) <= Self.maxChunkSize else {
                throw .chunkSizeOutOfRange(index: i, size: UInt64(c.size))
            }
            guard c.offset == expected else { throw .notContiguous(index: i, offset: c.offset, expected: expected) }
            expected += UInt64(c.size)
        }
        guard expected == fileSize else { throw .sizeMismatch(sumOfChunks: expected, fileSize: fileSize) }
        self.fileSize = fileSize
        self.chunks = chunks
        self.rootHash = Self.computeRoot(fileSize: fileSize, chunks: chunks)
    }

    /// The root hash of a chunk list (no checks).
    package static func computeRoot(fileSize: UInt64, chunks: [ChunkRef]) -> [UInt8] {
        var hasher = BLAKE3.Hasher()
        var header = domain
        appendBE(fileSize, to: &header)
        hasher.update(header)
        // Feed the entries in batches: one update per chunk would cost a call each.
        var batch = [UInt8]()
        batch.reserveCapacity(entrySize * min(chunks.count, 1024))   // a small file's root allocates no 36 KiB
        for c in chunks {
            appendEntry(c, to: &batch)
            if batch.count >= entrySize * 1024 {
                hasher.update(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        hasher.update(batch)
        return hasher.finalize()
    }

    /// Number of bytes `encode()` produces.
    package var encodedSize: Int { Self.magic.count + Self.headerSize - 4 + chunks.count * Self.entrySize + 32 }

    /// The binary encoding (see the type's documentation).
    package func encode() -> [UInt8] {
        var out = Self.magic
        out.reserveCapacity(encodedSize)
        Self.appendBE(fileSize, to: &out)
        Self.appendBE(UInt32(chunks.count), to: &out)
        for c in chunks { Self.appendEntry(c, to: &out) }
        out += rootHash
        return out
    }

    /// Decodes and checks an encoding received from a peer.
    package static func decode(_ bytes: [UInt8]) throws(ManifestError) -> Manifest {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(ManifestError) -> Manifest in try decode(raw) }
        }
        return try result.get()
    }

    /// Decodes and checks an encoding received from a peer.
    package static func decode(_ raw: UnsafeRawBufferPointer) throws(ManifestError) -> Manifest {
        let fixed = magic.count + headerSize - 4   // magic + fileSize + count
        guard raw.count >= fixed else { throw .truncated(needed: fixed + 32, available: raw.count) }
        guard raw[0] == magic[0], raw[1] == magic[1], raw[2] == magic[2], raw[3] == magic[3] else { throw .badMagic }
        let base = raw.baseAddress!
        let fileSize = UInt64(bigEndian: base.loadUnaligned(fromByteOffset: 4, as: UInt64.self))
        let count = UInt64(UInt32(bigEndian: base.loadUnaligned(fromByteOffset: 12, as: UInt32.self)))
        // Limits before any allocation.
        guard count <= UInt64(maxChunks) else { throw .tooManyChunks(count: count, limit: maxChunks) }
        let needed = fixed + Int(count) * entrySize + 32
        guard raw.count >= needed else { throw .truncated(needed: needed, available: raw.count) }
        guard raw.count == needed else { throw .trailingBytes(count: raw.count - needed) }

        var chunks: [ChunkRef] = []
        chunks.reserveCapacity(Int(count))
        var offset: UInt64 = 0
        var p = fixed
        for i in 0..<Int(count) {
            let size = UInt32(bigEndian: base.loadUnaligned(fromByteOffset: p, as: UInt32.self))
            guard size >= 1 && Int(size) <= maxChunkSize else { throw .chunkSizeOutOfRange(index: i, size: UInt64(size)) }
            chunks.append(ChunkRef(offset: offset, size: size, hash: ChunkHash(pointer: base + p + 4)))
            offset += UInt64(size)   // ≤ 2^20 × 2^24: cannot overflow
            p += entrySize
        }
        guard offset == fileSize else { throw .sizeMismatch(sumOfChunks: offset, fileSize: fileSize) }
        let root = Array(raw[p ..< p + 32])
        let manifest = Manifest(checkedFileSize: fileSize, chunks: chunks, rootHash: computeRoot(fileSize: fileSize, chunks: chunks))
        guard manifest.rootHash == root else { throw .rootHashMismatch }
        return manifest
    }

    /// Checks that `rootHash` (e.g. from an offer) names this manifest.
    package func matches(rootHash other: [UInt8]) -> Bool { other == rootHash }

    private init(checkedFileSize: UInt64, chunks: [ChunkRef], rootHash: [UInt8]) {
        self.fileSize = checkedFileSize
        self.chunks = chunks
        self.rootHash = rootHash
    }

    static func appendEntry(_ c: ChunkRef, to out: inout [UInt8]) {
        appendBE(c.size, to: &out)
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: ChunkHash.byteCount))
        out.withUnsafeMutableBytes { c.hash.write(to: $0.baseAddress! + start) }
    }

    static func appendBE<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }
}
