import Testing
import PeerCrypto

/// Known answers from RFC 7693 and CPython's independent `hashlib.blake2b`.
struct BLAKE2bTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let input: [UInt8]
        let key: [UInt8]?
        let length: Int
        let digest: String
        var testDescription: String { name }
    }

    static let vectors: [Vector] = [
        Vector(name: "RFC 7693 abc", input: Array("abc".utf8), key: nil, length: 64,
               digest: "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923"),
        Vector(name: "empty, 512-bit", input: [], key: nil, length: 64,
               digest: "786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce"),
        Vector(name: "empty, 256-bit", input: [], key: nil, length: 32,
               digest: "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"),
        Vector(name: "quick brown fox, 256-bit", input: Array("The quick brown fox jumps over the lazy dog".utf8), key: nil, length: 32,
               digest: "01718cec35cd3d796dd00020e0bfecb473ad23457d063b75eff29c0ffa2e58a9"),
        Vector(name: "keyed, empty input (BLAKE2 KAT)", input: [], key: Array(0..<64), length: 64,
               digest: "10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568"),
        Vector(name: "keyed, 256 bytes", input: Array(0...255), key: Array(0..<64), length: 64,
               digest: "b72071e096277edebb8ee5134dd3714996307ba3a55aa4733d412abbe28e909e10e57e6fbfb4ef53b3b960518294ff889a90829254412e2a60b85add07a3674f"),
    ]

    @Test(arguments: vectors)
    func knownAnswer(_ v: Vector) {
        let digest = BLAKE2b.hash(parts: [v.input], length: v.length, key: v.key)
        #expect(hex(digest) == v.digest)
        if v.key == nil {
            #expect(hex(BLAKE2b.hash(v.input, length: v.length)) == v.digest)
        }
    }

    /// 1,000,000 bytes fed in uneven pieces give the one-shot digest (and CPython's).
    @Test(arguments: [1, 7, 128, 129, 4096, 65_537, 1_000_000])
    func streamingMatchesOneShot(pieceSize: Int) {
        let data = (0..<1_000_000).map { UInt8($0 % 251) }
        var hasher = BLAKE2b.Hasher(length: 32)
        var offset = 0
        while offset < data.count {
            let end = min(offset + pieceSize, data.count)
            hasher.update(data[offset..<end])
            offset = end
        }
        let expected = "9e5e2f2d303e7db6db30a3355a9a7def57785f58e04a95b22254b60ab9e9a51b"
        #expect(hex(hasher.finalize()) == expected)
        #expect(hex(BLAKE2b.hash(data)) == expected)
    }

    /// A copied hasher diverges independently of the original (copy on write).
    @Test func copiedHasherIsIndependent() {
        var a = BLAKE2b.Hasher(length: 32)
        a.update(Array("The quick brown fox ".utf8))
        var b = a
        a.update(Array("jumps over the lazy dog".utf8))
        b.update(Array("is quick".utf8))
        #expect(hex(a.finalize()) == "01718cec35cd3d796dd00020e0bfecb473ad23457d063b75eff29c0ffa2e58a9")
        #expect(b.finalize() == BLAKE2b.hash(Array("The quick brown fox is quick".utf8)))
    }
}
