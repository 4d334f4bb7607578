import Testing
import PeerCrypto

struct KeyTests {
    /// RFC 7748 §6.1 Diffie-Hellman test vector.
    @Test func x25519KnownAnswer() throws {
        let alice = try KeyPair(privateKeyBytes: bytes(fromHex: "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")!)
        let bob = try KeyPair(privateKeyBytes: bytes(fromHex: "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")!)
        #expect(alice.publicKey.description == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        #expect(bob.publicKey.description == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        let ab = try alice.sharedSecret(with: bob.publicKey)
        let ba = try bob.sharedSecret(with: alice.publicKey)
        #expect(ab == ba)
        #expect(hex(ab.unsafeCopy()) == "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
    }

    @Test func lengthsAreChecked() {
        #expect(throws: CryptoError.invalidLength(what: "X25519 public key", expected: 32, actual: 31)) {
            try PublicKey([UInt8](repeating: 1, count: 31))
        }
        #expect(throws: CryptoError.self) { try KeyPair(privateKeyBytes: [UInt8](repeating: 1, count: 33)) }
    }

    @Test func lowOrderPointIsRefused() throws {
        let zero = try PublicKey([UInt8](repeating: 0, count: 32))
        #expect(throws: CryptoError.self) { try KeyPair.generate().sharedSecret(with: zero) }
    }

    @Test func secretsAreRedactedAndCompareByValue() {
        let a = SecureBytes([1, 2, 3] as [UInt8])
        let b = SecureBytes([1, 2, 3] as [UInt8])
        let c = SecureBytes([1, 2, 4] as [UInt8])
        #expect(a == b)
        #expect(a != c)
        #expect(!"\(a)".contains("1"))
        #expect("\(a)".contains("redacted"))
    }

    @Test func aeadRejectsTampering() throws {
        let key = SecureBytes.random(count: 32)
        let sealed = ChaChaPoly.seal(key: key, nonce: 7, ad: [9, 9] as [UInt8], plaintext: Array("hello".utf8))
        #expect(try ChaChaPoly.open(key: key, nonce: 7, ad: [9, 9] as [UInt8], ciphertext: sealed) == Array("hello".utf8))
        for i in sealed.indices {
            var bad = sealed
            bad[i] ^= 0x01
            #expect(throws: CryptoError.authenticationFailed) {
                try ChaChaPoly.open(key: key, nonce: 7, ad: [9, 9] as [UInt8], ciphertext: bad)
            }
        }
        #expect(throws: CryptoError.authenticationFailed) {
            try ChaChaPoly.open(key: key, nonce: 8, ad: [9, 9] as [UInt8], ciphertext: sealed)
        }
    }
}
