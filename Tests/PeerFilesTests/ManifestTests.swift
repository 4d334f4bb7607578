import PeerCrypto
import PeerFiles
import Testing
import TestKit

@Suite struct ManifestTests {
    static func sample(chunkCount: Int, seed: UInt64 = 1) throws -> Manifest {
        var rng = SplitMix64(seed: seed)
        var offset: UInt64 = 0
        var chunks: [ChunkRef] = []
        for _ in 0..<chunkCount {
            let size = UInt32(rng.next() % 100_000 + 1)
            let hash = ChunkHash(bytes: (0..<32).map { _ in UInt8(truncatingIfNeeded: rng.next()) })!
            chunks.append(ChunkRef(offset: offset, size: size, hash: hash))
            offset += UInt64(size)
        }
        return try Manifest(fileSize: offset, chunks: chunks)
    }

    @Test(arguments: [0, 1, 2, 1_000, 100_000])
    func roundTrip(chunkCount: Int) throws {
        let manifest = try Self.sample(chunkCount: chunkCount)
        let bytes = manifest.encode()
        #expect(bytes.count == 48 + 36 * chunkCount)
        #expect(bytes.count == manifest.encodedSize)
        let decoded = try Manifest.decode(bytes)
        #expect(decoded == manifest)
        #expect(decoded.rootHash.count == 32)
        #expect(decoded.matches(rootHash: manifest.rootHash))
    }

    @Test func rootDependsOnEverything() throws {
        let base = try Self.sample(chunkCount: 3)
        var chunks = base.chunks
        chunks[1].hash = ChunkHash(bytes: [UInt8](repeating: 7, count: 32))!
        let otherHash = try Manifest(fileSize: base.fileSize, chunks: chunks)
        // Same bytes split differently: sizes are part of the root.
        var resplit = base.chunks
        resplit[0].size += 1
        resplit[1].offset += 1
        resplit[1].size -= 1
        let otherSplit = try Manifest(fileSize: base.fileSize, chunks: resplit)
        #expect(Set([base.rootHash, otherHash.rootHash, otherSplit.rootHash]).count == 3)
    }

    /// Inconsistent chunk lists are refused when a manifest is built, too.
    @Test func initChecksConsistency() throws {
        let h = ChunkHash(bytes: [UInt8](repeating: 1, count: 32))!
        #expect(throws: ManifestError.sizeMismatch(sumOfChunks: 10, fileSize: 11)) {
            try Manifest(fileSize: 11, chunks: [ChunkRef(offset: 0, size: 10, hash: h)])
        }
        #expect(throws: ManifestError.notContiguous(index: 1, offset: 11, expected: 10)) {
            try Manifest(fileSize: 20, chunks: [ChunkRef(offset: 0, size: 10, hash: h), ChunkRef(offset: 11, size: 9, hash: h)])
        }
        #expect(throws: ManifestError.notContiguous(index: 0, offset: 5, expected: 0)) {
            try Manifest(fileSize: 10, chunks: [ChunkRef(offset: 5, size: 10, hash: h)])
        }
        #expect(throws: ManifestError.chunkSizeOutOfRange(index: 0, size: 0)) {
            try Manifest(fileSize: 0, chunks: [ChunkRef(offset: 0, size: 0, hash: h)])
        }
        let big = UInt32(Manifest.maxChunkSize + 1)
        #expect(throws: ManifestError.chunkSizeOutOfRange(index: 0, size: UInt64(big))) {
            try Manifest(fileSize: UInt64(big), chunks: [ChunkRef(offset: 0, size: big, hash: h)])
        }
    }

    struct BadInput: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var error: ManifestError
        var testDescription: String { name }
    }

    static func be<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v.bigEndian, Array.init) }
    static let magic = Array("SPM1".utf8)
    static let zeros32 = [UInt8](repeating: 0, count: 32)
    static func entry(_ size: UInt32) -> [UInt8] { be(size) + [UInt8](repeating: 0xAB, count: 32) }

    static let badInputs: [BadInput] = [
        BadInput(name: "empty", bytes: [], error: .truncated(needed: 48, available: 0)),
        BadInput(name: "magic only", bytes: magic, error: .truncated(needed: 48, available: 4)),
        BadInput(name: "wrong magic", bytes: Array("SPM2".utf8) + be(UInt64(0)) + be(UInt32(0)) + zeros32, error: .badMagic),
        BadInput(name: "text", bytes: Array("hello, this is not a manifest at all!!!!!!!!!!!!!!!".utf8), error: .badMagic),
        BadInput(name: "no root hash", bytes: magic + be(UInt64(0)) + be(UInt32(0)), error: .truncated(needed: 48, available: 16)),
        BadInput(name: "count 2^32-1, no allocation", bytes: magic + be(UInt64(0)) + be(UInt32.max) + zeros32,
                 error: .tooManyChunks(count: UInt64(UInt32.max), limit: 1 << 20)),
        BadInput(name: "count just over the limit", bytes: magic + be(UInt64(0)) + be(UInt32(1 << 20 + 1)) + zeros32,
                 error: .tooManyChunks(count: UInt64(1 << 20 + 1), limit: 1 << 20)),
        BadInput(name: "count at the limit, bytes missing", bytes: magic + be(UInt64(0)) + be(UInt32(1 << 20)) + zeros32,
                 error: .truncated(needed: 48 + 36 << 20, available: 48)),
        BadInput(name: "one chunk announced, none present", bytes: magic + be(UInt64(5)) + be(UInt32(1)) + zeros32,
                 error: .truncated(needed: 84, available: 48)),
        BadInput(name: "trailing byte", bytes: magic + be(UInt64(0)) + be(UInt32(0)) + zeros32 + [0],
                 error: .trailingBytes(count: 1)),
        BadInput(name: "chunk of size 0", bytes: magic + be(UInt64(0)) + be(UInt32(1)) + entry(0) + zeros32,
                 error: .chunkSizeOutOfRange(index: 0, size: 0)),
        BadInput(name: "chunk over 16 MiB", bytes: magic + be(UInt64(1 << 24 + 1)) + be(UInt32(1)) + entry(1 << 24 + 1) + zeros32,
                 error: .chunkSizeOutOfRange(index: 0, size: 1 << 24 + 1)),
        BadInput(name: "sizes exceed file size", bytes: magic + be(UInt64(10)) + be(UInt32(2)) + entry(6) + entry(6) + zeros32,
                 error: .sizeMismatch(sumOfChunks: 12, fileSize: 10)),
        BadInput(name: "sizes short of file size", bytes: magic + be(UInt64(100)) + be(UInt32(1)) + entry(6) + zeros32,
                 error: .sizeMismatch(sumOfChunks: 6, fileSize: 100)),
        BadInput(name: "nonzero file size without chunks", bytes: magic + be(UInt64(1)) + be(UInt32(0)) + zeros32,
                 error: .sizeMismatch(sumOfChunks: 0, fileSize: 1)),
        BadInput(name: "wrong root hash", bytes: magic + be(UInt64(6)) + be(UInt32(1)) + entry(6) + zeros32,
                 error: .rootHashMismatch),
    ]

    @Test(arguments: badInputs)
    func decodeRefuses(input: BadInput) {
        #expect(throws: input.error) { try Manifest.decode(input.bytes) }
        #expect(!input.error.description.isEmpty)
    }

    @Test func everyTruncationIsRefused() throws {
        let bytes = try Self.sample(chunkCount: 20).encode()
        for length in 0..<bytes.count {
            #expect(throws: ManifestError.self) { try Manifest.decode(Array(bytes.prefix(length))) }
        }
    }

    /// 10,000 hostile inputs: random bytes, random headers, truncations and bit flips of
    /// valid encodings. Each must decode to a manifest that re-encodes to the same bytes,
    /// or throw a ManifestError; it must never crash or allocate beyond its limits.
    @Test func fuzz() throws {
        var rng = SplitMix64(seed: 0xF022)
        let valid = try (0..<8).map { try Self.sample(chunkCount: $0 * 3, seed: UInt64($0)).encode() }
        var accepted = 0
        var refused = 0
        var acceptedFlips = 0
        for round in 0..<10_000 {
            var input: [UInt8]
            switch round % 5 {
            case 0:   // random garbage
                input = (0..<Int(rng.next() % 300)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            case 1:   // garbage behind a correct magic, random count
                input = Self.magic + (0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            case 2:   // a valid manifest cut short
                let v = valid[Int(rng.next() % UInt64(valid.count))]
                input = Array(v.prefix(Int(rng.next() % UInt64(v.count + 1))))
            case 3:   // a valid manifest with 1–3 bit flips
                input = valid[Int(rng.next() % UInt64(valid.count))]
                for _ in 0...(rng.next() % 3) {
                    let i = Int(rng.next() % UInt64(input.count))
                    input[i] ^= 1 << UInt8(rng.next() % 8)
                }
            default:  // a valid header with a random count and a random tail
                input = Self.magic + Self.be(rng.next() % 1_000_000) + Self.be(UInt32(truncatingIfNeeded: rng.next() >> (rng.next() % 32)))
                input += (0..<Int(rng.next() % 400)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            do {
                let m = try Manifest.decode(input)
                #expect(m.encode() == input)
                accepted += 1
                if round % 5 == 3 { acceptedFlips += 1 }
            } catch {
                #expect(!error.description.isEmpty)
                refused += 1
            }
        }
        // Every bit flip is caught (sizes by the sum or the root, hashes by the root).
        #expect(acceptedFlips == 0)
        #expect(refused + accepted == 10_000)
        #expect(refused > 9_000)
    }
}
