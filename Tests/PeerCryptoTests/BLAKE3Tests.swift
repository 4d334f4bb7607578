import Foundation
@testable import PeerCrypto
import Testing

/// Known answers: the BLAKE3 team's test vectors (`Vectors/blake3-test-vectors.json`, from
/// github.com/BLAKE3-team/BLAKE3 test_vectors/, commit 77b257e; hash mode, whose first 32
/// bytes of output are the digest), and longer inputs hashed with PyPI's `blake3` (the
/// team's Rust implementation). Every input is the repeating bytes 0, 1, …, 250.
struct BLAKE3Tests {
    struct Case: Sendable, CustomTestStringConvertible {
        let length: Int
        let digest: String
        var testDescription: String { "\(length) bytes" }
    }

    static let published: [Case] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Vectors/blake3-test-vectors.json")
        guard let data = try? Data(contentsOf: url),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let cases = json["cases"] as? [[String: Any]] else { return [] }
        return cases.compactMap { item in
            guard let length = item["input_len"] as? Int, let hash = item["hash"] as? String else { return nil }
            return Case(length: length, digest: String(hash.prefix(64)))
        }
    }()

    /// Longer than the published cases: full 1,024-chunk subtrees, and uneven tails.
    static let long: [Case] = [
        Case(length: 16 * 1024 + 1, digest: "1dabe216be2578830263b049de1639f39f05a4da616b9b78c7a5e4e41662fd1f"),
        Case(length: 17 * 1024, digest: "993924ff3dcbd868be9cf3fed98d4538fe579ffccf390a5aa1ddba0f6a20bfed"),
        Case(length: 1 << 20, digest: "74cb441fd087764ca9c3694da742ebe30cbeb3060a17009ca81825c7a8d10343"),
        Case(length: (1 << 20) + 1, digest: "2f053cd7472cf0cd2f9adaf45c1180255b91b9a865404a63671a0ee5f792ed33"),
        Case(length: 3 * (1 << 20) + 17, digest: "26003c63117013de5d02be76e5e32a2f75bfbc075f17180fd5f9f0b4752d2bfe"),
    ]

    /// Every lane width this CPU runs (4 always; 8 with AVX2, 16 with AVX-512).
    static let widths = [4, 8, 16].filter { $0 <= BLAKE3.lanes }

    static func input(_ length: Int) -> [UInt8] { (0..<length).map { UInt8($0 % 251) } }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func allPublishedVectorsLoaded() {
        // 35 cases, 0 … 102,400 bytes, in the file this test tree carries.
        #expect(Self.published.count == 35)
        #expect(Self.published.last?.length == 102_400)
    }

    @Test(arguments: published + long)
    func oneShotMatchesTheKnownAnswer(_ vector: Case) {
        #expect(Self.hex(BLAKE3.hash(Self.input(vector.length))) == vector.digest)
    }

    @Test(arguments: published + long)
    func everyLaneWidthGivesTheSameDigest(_ vector: Case) {
        let bytes = Self.input(vector.length)
        for width in Self.widths {
            var hasher = BLAKE3.Hasher(lanes: width)
            hasher.update(bytes)
            #expect(Self.hex(hasher.finalize()) == vector.digest, "\(width) lanes")
            var out = [UInt8](repeating: 0, count: 32)
            bytes.withUnsafeBytes { data in out.withUnsafeMutableBytes { BLAKE3.hash(data, into: $0.baseAddress!, widest: width) } }
            #expect(Self.hex(out) == vector.digest, "one pass, \(width) lanes")
        }
    }

    /// Every chunk count from 1 to 70 (odd ones carried up at each level of the tree), full
    /// and partial last chunks: the one-pass tree at each lane width equals the streaming
    /// hasher's, which the known answers pin.
    @Test func theOnePassTreeMatchesTheStreamingHasherForEveryChunkCount() {
        for chunks in 1...70 {
            for length in [chunks * 1024 - 1023, chunks * 1024 - 1, chunks * 1024] {
                let bytes = Self.input(length)
                var streaming = BLAKE3.Hasher(lanes: 4)
                streaming.update(bytes)
                let expected = streaming.finalize()
                for width in Self.widths {
                    var out = [UInt8](repeating: 0, count: 32)
                    bytes.withUnsafeBytes { data in out.withUnsafeMutableBytes { BLAKE3.hash(data, into: $0.baseAddress!, widest: width) } }
                    #expect(out == expected, "\(length) bytes, \(width) lanes")
                }
            }
        }
    }

    /// Fed in uneven pieces (1 byte, a chunk and a byte, odd sizes, a large piece at an
    /// unaligned position), the streaming hasher gives the one-shot digest.
    @Test(arguments: [1, 7, 1023, 1024, 1025, 4096, 65_537, 300_000])
    func piecesGiveTheOneShotDigest(_ piece: Int) {
        let vector = Self.long[4]
        let bytes = Self.input(vector.length)
        for width in Self.widths {
            var hasher = BLAKE3.Hasher(lanes: width)
            var offset = 0
            var size = piece
            while offset < bytes.count {
                let end = min(bytes.count, offset + size)
                bytes[offset..<end].withUnsafeBytes { hasher.update($0) }
                offset = end
                size = size == piece ? 2 * piece + 3 : piece   // alternate, so cuts fall everywhere
            }
            #expect(Self.hex(hasher.finalize()) == vector.digest, "pieces of \(piece), \(width) lanes")
        }
    }

    @Test func hashIntoWritesTheDigest() {
        let bytes = Self.input(5_000)
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { data in out.withUnsafeMutableBytes { BLAKE3.hash(data, into: $0.baseAddress!) } }
        #expect(out == BLAKE3.hash(bytes))
    }
}
