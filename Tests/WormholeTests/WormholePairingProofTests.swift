import PeerCrypto
import Testing
@testable import Wormhole

/// The proof `pair --code` asks of each side: what alice sends is what bob expects from
/// her; it differs from bob's (an echo fails); a node that names alice's key without her
/// private key, or a proof made for another wormhole, does not pass.
struct WormholePairingProofTests {
    let alice = KeyPair.generate(), bob = KeyPair.generate(), mallory = KeyPair.generate()
    let salt = [UInt8](repeating: 7, count: 32)

    @Test func onlyTheKeyHolderCanProveAndEchoesFail() throws {
        let fromAlice = try WormholePairing.proof(salt: salt, alice, other: bob.publicKey, fromUs: true)
        let bobExpects = try WormholePairing.proof(salt: salt, bob, other: alice.publicKey, fromUs: false)
        #expect(fromAlice == bobExpects)
        #expect(fromAlice.count == 32)
        // Bob's own proof is not alice's: echoing what bob sent does not pass.
        let fromBob = try WormholePairing.proof(salt: salt, bob, other: alice.publicKey, fromUs: true)
        #expect(fromBob != bobExpects)
        // Mallory claims alice's key: what she can compute (with her own private key) is not it.
        let forged = try WormholePairing.proof(salt: salt, mallory, other: bob.publicKey, fromUs: true)
        #expect(forged != bobExpects)
        // Another wormhole (another salt): the proof does not carry over.
        let elsewhere = try WormholePairing.proof(salt: [UInt8](repeating: 8, count: 32), alice, other: bob.publicKey, fromUs: true)
        #expect(elsewhere != bobExpects)
    }
}
