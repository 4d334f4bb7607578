import Foundation
@testable import PeerCrypto
import Testing

/// Known answers from the reference python-spake2 and Magic Wormhole's key derivation
/// (`Vectors/spake2-wormhole.json`, made by `Vectors/make-spake2-vectors.py`): the
/// blinding point S, the password scalar, both messages, the shared key, the phase,
/// verifier and transit keys, and a SecretBox under a fixed nonce.
struct SPAKE2VectorTests {
    struct Vectors: Decodable {
        struct Case: Decodable {
            struct PhaseKey: Decodable { let side, phase, key: String }
            struct Box: Decodable { let nonce, plaintext, box: String }
            let password, idSymmetric, passwordScalar, scalarA, scalarB, messageA, messageB, key: String
            let phaseKey: PhaseKey
            let verifier, transitKey: String
            let versionBox: Box
        }
        struct Wrong: Decodable {
            let passwordA, passwordB, idSymmetric, scalarA, scalarB, messageA, messageB, keyA, keyB: String
        }
        let S: String
        let cases: [Case]
        let wrongPassword: Wrong
    }

    static let vectors: Vectors = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Vectors/spake2-wormhole.json")
        // A missing or unreadable file fails every test that reads it.
        let data = (try? Data(contentsOf: url)) ?? Data()
        return (try? JSONDecoder().decode(Vectors.self, from: data)) ?? Vectors(S: "", cases: [], wrongPassword: .init(
            passwordA: "", passwordB: "", idSymmetric: "", scalarA: "", scalarB: "", messageA: "", messageB: "", keyA: "", keyB: ""))
    }()

    static func b(_ text: String) -> [UInt8] { bytes(fromHex: text) ?? [0xFF] }

    @Test func blindingPointIsTheReferenceS() {
        #expect(hex(SPAKE2Symmetric.blindingPoint) == Self.vectors.S)
        #expect(Self.vectors.S.count == 64)
    }

    @Test(arguments: 0..<4) func referenceExchange(_ index: Int) throws {
        try #require(Self.vectors.cases.count == 4, "vector file missing or short")
        let v = Self.vectors.cases[index]
        #expect(hex(SPAKE2Symmetric.passwordScalar(Self.b(v.password)).unsafeCopy()) == v.passwordScalar)
        let a = SPAKE2Symmetric(password: Self.b(v.password), identity: Self.b(v.idSymmetric), secretScalar: SecureBytes(Self.b(v.scalarA)))
        let bSide = SPAKE2Symmetric(password: Self.b(v.password), identity: Self.b(v.idSymmetric), secretScalar: SecureBytes(Self.b(v.scalarB)))
        #expect(hex(a.outboundMessage) == v.messageA)
        #expect(hex(bSide.outboundMessage) == v.messageB)
        let keyA = try a.finish(Self.b(v.messageB))
        let keyB = try bSide.finish(Self.b(v.messageA))
        #expect(hex(keyA.unsafeCopy()) == v.key)
        #expect(keyA == keyB)

        let phase = HKDFSHA256.derive(inputKeyMaterial: keyA, info: Array("wormhole:phase:".utf8) + SHA256.hash(Array(v.phaseKey.side.utf8)) + SHA256.hash(Array(v.phaseKey.phase.utf8)), length: 32)
        #expect(hex(phase.unsafeCopy()) == v.phaseKey.key)
        #expect(hex(HKDFSHA256.derive(inputKeyMaterial: keyA, info: Array("wormhole:verifier".utf8), length: 32).unsafeCopy()) == v.verifier)
        #expect(hex(HKDFSHA256.derive(inputKeyMaterial: keyA, info: Array("lothar.com/wormhole/text-or-file-xfer/transit-key".utf8), length: 32).unsafeCopy()) == v.transitKey)

        let box = try SecretBox(key: phase)
        #expect(hex(box.seal(Self.b(v.versionBox.plaintext), nonce: Self.b(v.versionBox.nonce))) == v.versionBox.box)
        #expect(try box.open(Self.b(v.versionBox.box)) == Self.b(v.versionBox.plaintext))
    }

    @Test func wrongPasswordGivesTheReferenceDifferentKeys() throws {
        let w = Self.vectors.wrongPassword
        let a = SPAKE2Symmetric(password: Self.b(w.passwordA), identity: Self.b(w.idSymmetric), secretScalar: SecureBytes(Self.b(w.scalarA)))
        let bSide = SPAKE2Symmetric(password: Self.b(w.passwordB), identity: Self.b(w.idSymmetric), secretScalar: SecureBytes(Self.b(w.scalarB)))
        #expect(hex(a.outboundMessage) == w.messageA)
        #expect(hex(bSide.outboundMessage) == w.messageB)
        let keyA = try a.finish(Self.b(w.messageB)), keyB = try bSide.finish(Self.b(w.messageA))
        #expect(hex(keyA.unsafeCopy()) == w.keyA)
        #expect(hex(keyB.unsafeCopy()) == w.keyB)
        #expect(keyA != keyB)
        // A box sealed under one side's key does not open under the other's.
        let sealed = try SecretBox(key: keyA).seal([1, 2, 3])
        #expect(throws: CryptoError.authenticationFailed) { try SecretBox(key: keyB).open(sealed) }
    }

    @Test func randomExchangesAgree() throws {
        let a = SPAKE2Symmetric(password: Array("3-a-b".utf8), identity: [1])
        let bSide = SPAKE2Symmetric(password: Array("3-a-b".utf8), identity: [1])
        #expect(try a.finish(bSide.outboundMessage) == bSide.finish(a.outboundMessage))
    }

    /// Hostile messages: wrong length, wrong side byte, not a group element, the identity,
    /// our own message reflected, a second finish.
    @Test func hostileMessagesAreRefused() throws {
        let good = SPAKE2Symmetric(password: [1], identity: []).outboundMessage
        let bad: [[UInt8]] = [[], Array(good.prefix(32)), good + [0], [UInt8(ascii: "A")] + good.dropFirst(),
                              [UInt8(ascii: "S")] + [UInt8](repeating: 0xFF, count: 32), [UInt8(ascii: "S")] + Ed25519Group.identity]
        for message in bad {
            let side = SPAKE2Symmetric(password: [1], identity: [])
            #expect(throws: CryptoError.self) { try side.finish(message) }
        }
        let side = SPAKE2Symmetric(password: [1], identity: [])
        #expect(throws: CryptoError.self) { try side.finish(side.outboundMessage) }
        #expect(throws: CryptoError.self) { try side.finish(good) }
        #expect(throws: CryptoError.self) { try SecretBox(key: SecureBytes([1])) }
        #expect(throws: CryptoError.authenticationFailed) { try SecretBox(key: SecureBytes(count: 32) { _ in }).open([UInt8](repeating: 0, count: 39)) }
    }
}
