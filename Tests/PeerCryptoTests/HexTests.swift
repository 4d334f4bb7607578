import Foundation
import PeerCrypto
import Testing

/// `hex` writes into the string's own storage for what a sequence says it holds at least,
/// and appends the rest: both paths give the same lower-case digits.
struct HexTests {
    @Test func hexOfBytes() {
        #expect(hex([UInt8]()) == "")
        #expect(hex([0x00, 0x0f, 0xa0, 0xff, 0x5c]) == "000fa0ff5c")
        // A lazy filter reports no elements up front: every digit is appended.
        let lazy = [UInt8](0...255).lazy.filter { _ in true }
        #expect(lazy.underestimatedCount == 0)
        let expected = (0...255).map { String(format: "%02x", $0) }.joined()
        #expect(hex(lazy) == expected)
        #expect(hex([UInt8](0...255)) == expected)
        #expect(hex([UInt8](0...255).prefix(7)) == String(expected.prefix(14)))
    }

    /// A sequence that claims `claimed` elements up front, fewer or more than it has.
    struct Claiming: Sequence {
        let bytes: [UInt8]
        let claimed: Int
        var underestimatedCount: Int { claimed }
        func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }
    }

    @Test func hexOfASequenceThatMiscountsItself() {
        for count in 0..<40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let expected = hex(bytes)
            for claimed in 0...(count + 3) {
                #expect(hex(Claiming(bytes: bytes, claimed: claimed)) == expected, "\(count) bytes, \(claimed) claimed")
            }
        }
    }

    @Test func hexRoundTrips() {
        var generator = SystemRandomNumberGenerator()
        for count in 0..<100 {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(PeerCrypto.bytes(fromHex: hex(bytes)) == bytes)
        }
    }
}
