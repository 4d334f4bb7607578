import PeerCrypto
import Testing

@Suite struct SecureChannelSASTests {
    /// Known answers computed independently with Python's hashlib:
    /// `blake2b(b"syncpeer-sas" + h, digest_size=32)`, first 4 bytes big-endian mod 10^6.
    @Test(arguments: [
        (Array(0..<64) as [UInt8], "558494"),  // digest starts 2e f1 30 5e
        ([UInt8](repeating: 0, count: 64), "023522"),  // 74 96 8c e2: keeps the leading zero
        ([UInt8](repeating: 0xFF, count: 64), "245290"),  // d8 8e ec 6a
    ])
    func knownAnswers(hash: [UInt8], expected: String) {
        #expect(ShortAuthenticationString.derive(handshakeHash: hash) == expected)
    }

    @Test func alwaysSixDigitsAndSensitiveToEveryByte() {
        let base = [UInt8](repeating: 0x42, count: 64)
        let code = ShortAuthenticationString.derive(handshakeHash: base)
        var codes: Set<String> = [code]
        for index in base.indices {
            var changed = base
            changed[index] ^= 0x01
            let other = ShortAuthenticationString.derive(handshakeHash: changed)
            #expect(other.count == 6 && other.allSatisfy(\.isASCII) && other.allSatisfy(\.isNumber))
            codes.insert(other)
        }
        #expect(codes.count == 65, "each one-bit change gives a different code (no collision among these)")
    }
}
