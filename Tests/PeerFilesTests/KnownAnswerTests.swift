import PeerCrypto
import PeerFiles
import Testing
import TestKit

/// Pinned outputs of the chunker and the manifest for a fixed input.
///
/// COMPATIBILITY: these values are part of the wire format. Peers reuse each other's
/// chunks and compare root hashes only if they cut and hash identically, so a change to
/// the gear table, the masks, the cut rule, `ChunkParameters.forFileSize`, the root-hash
/// layout or the manifest encoding makes this test fail — and breaks compatibility with
/// every released peer. Never "fix" the expected values; introduce a new version
/// ("v2" in the gear seed, the manifest domain and magic) instead. Protocol versions 3 and
/// 4 did so for the content hash: chunks and roots are BLAKE3 and the root's domain is
/// "syncpeer-manifest-v3" since version 4 (version 3 had SHA-256 and "syncpeer-manifest-v2",
/// version 2 BLAKE2b-256 and "syncpeer-manifest-v1"); the gear table and the cut points
/// did not change.
///
/// The values were computed once and cross-checked with an independent implementation
/// of the documented rules in Python (hashlib's BLAKE2b for the gear table, PyPI `blake3`
/// for chunks and roots), reproduced here so that anyone can recompute them:
///
///     import hashlib, blake3
///     M = (1 << 64) - 1
///     gear = [int.from_bytes(hashlib.blake2b(b"syncpeer-fastcdc-gear-v1" + bytes([i]),
///                                            digest_size=8).digest(), "big") for i in range(256)]
///     def splitmix(seed, count):
///         s, out = seed, bytearray()
///         while len(out) < count:
///             s = (s + 0x9E3779B97F4A7C15) & M; z = s
///             z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
///             z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
///             out += (z ^ (z >> 31)).to_bytes(8, "little")
///         return bytes(out[:count])
///     def cut(d, off, n, mn, avg, mx):
///         if n <= mn: return n
///         end = min(n, mx); normal = min(avg, end); bits = avg.bit_length() - 1
///         strict = (M << (64 - (bits + 2))) & M; loose = (M << (64 - (bits - 2))) & M
///         fp = 0
///         for i in range(mn, end):
///             fp = ((fp << 1) + gear[d[off + i]]) & M
///             if fp & (strict if i < normal else loose) == 0: return i + 1
///         return end
///     def boundaries(d, mn, avg, mx):
///         off, r = 0, []
///         while off < len(d): off += cut(d, off, len(d) - off, mn, avg, mx); r.append(off)
///         return r
///     def root(size, chunks):   # chunks: [(size, 32-byte hash)]
///         h = blake3.blake3(b"syncpeer-manifest-v3" + size.to_bytes(8, "big"))
///         for s, c in chunks: h.update(s.to_bytes(4, "big") + c)
///         return h.hexdigest()
@Suite struct ChunkerKnownAnswerTests {
    /// 1 MiB from SplitMix64 seeded with 0x73796E63 ("sync"), outputs stored little-endian.
    static let input = pseudoRandomBytes(count: 1 << 20, seed: 0x7379_6E63)

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    @Test func gearTable() {
        let table = Chunker.gearTable
        #expect(table.count == 256)
        #expect(table[0] == 6_269_834_989_693_528_342)
        #expect(table[1] == 6_886_606_803_057_854_571)
        #expect(table[255] == 11_044_601_706_076_782_925)
        var bytes: [UInt8] = []
        for g in table { withUnsafeBytes(of: g.bigEndian) { bytes += $0 } }
        #expect(Self.hex(BLAKE2b.hash(bytes, length: 32)) == "4616e8b2ef50cd4c9bd6e52377bd8e9c3d12eae61d901ee61e59ed6fa0407dee")
    }

    @Test func pseudoRandomInputIsStable() {
        #expect(Self.hex(Array(Self.input.prefix(16))) == "e439c56bc52991465607c3125b173ab0")
        #expect(Self.hex(BLAKE2b.hash(Self.input, length: 32)) == "44414cb716c315f22a30069174d141f750964bda9004e9051c5b1e8db80a1232")
    }

    /// With the parameters of a 1 MiB file (min 16 KiB, avg 64 KiB, max 256 KiB).
    @Test func defaultParameters() throws {
        let parameters = ChunkParameters.forFileSize(UInt64(Self.input.count))
        #expect(parameters == ChunkParameters(minSize: 16_384, averageSize: 65_536, maxSize: 262_144))
        #expect(Chunker.boundaries(in: Self.input, parameters: parameters)
                == [86_154, 138_859, 250_805, 322_175, 401_897, 474_014, 528_863, 704_565, 762_858, 889_935, 995_211, 1_048_576])
        let manifest = try Manifest(fileSize: UInt64(Self.input.count), chunks: referenceChunks(Self.input, parameters: parameters))
        #expect(manifest.chunks[0].hash.description == "374faad3258f86110f7d5ba9c33a3e9eddc2f0ddffd9a7efbf9004cbf28e3279")
        #expect(Self.hex(manifest.rootHash) == "9bdebc21a0e317b6e0cd576771c13d4b4b3215c0b5db05a09c9e6fd3d21d4835")
        // The same through the file chunker.
        try withTemporaryDirectory { dir in
            try writeFile(dir + "/in", Self.input)
            #expect(try FileChunker.manifest(ofFileAt: dir + "/in") == manifest)
        }
    }

    /// With small parameters (min 2 KiB, avg 8 KiB, max 32 KiB): 107 chunks.
    @Test func smallParameters() throws {
        let parameters = ChunkParameters(minSize: 2_048, averageSize: 8_192, maxSize: 32_768)
        let boundaries = Chunker.boundaries(in: Self.input, parameters: parameters)
        #expect(boundaries.count == 107)
        #expect(Array(boundaries.prefix(8)) == [10_144, 19_750, 30_278, 39_203, 48_097, 56_765, 63_590, 79_578])
        let manifest = try Manifest(fileSize: UInt64(Self.input.count), chunks: referenceChunks(Self.input, parameters: parameters))
        #expect(manifest.chunks[0].hash.description == "e5f22d690cfe5f8cf93136a34ad43651a6efac7456f12e3fa0ce59fac6b6332d")
        #expect(Self.hex(manifest.rootHash) == "d4c7d85d4ce45805ecca2d1c225838d00e88ac6b69d635fe75ab4b3203cb18af")
    }

    @Test func emptyFile() throws {
        let manifest = try Manifest(fileSize: 0, chunks: [])
        #expect(Self.hex(manifest.rootHash) == "5be7e16652907a8412429895e7b793f673778fd97e7fa96d888fe9eed0381616")
        #expect(manifest.encode() == Array("SPM1".utf8) + [UInt8](repeating: 0, count: 12) + manifest.rootHash)
    }

    /// The encoding of a two-chunk manifest, byte for byte.
    @Test func encodingLayout() throws {
        let h1 = ChunkHash(bytes: [UInt8](repeating: 0x11, count: 32))!
        let h2 = ChunkHash(bytes: [UInt8](repeating: 0x22, count: 32))!
        let two = try Manifest(fileSize: 3 + 5, chunks: [
            ChunkRef(offset: 0, size: 3, hash: h1), ChunkRef(offset: 3, size: 5, hash: h2),
        ])
        var expected = Array("SPM1".utf8) + [0, 0, 0, 0, 0, 0, 0, 8] + [0, 0, 0, 2]
        expected += [0, 0, 0, 3] + h1.bytes + [0, 0, 0, 5] + h2.bytes
        let root = BLAKE3.hash(Array("syncpeer-manifest-v3".utf8) + [0, 0, 0, 0, 0, 0, 0, 8]
                                   + [0, 0, 0, 3] + h1.bytes + [0, 0, 0, 5] + h2.bytes)
        #expect(two.rootHash == root)
        #expect(two.encode() == expected + root)
        #expect(two.encodedSize == expected.count + 32)
    }
}
