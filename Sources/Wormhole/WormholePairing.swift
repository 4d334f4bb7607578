internal import FoundationEssentials
package import PeerCrypto

/// `syncpeer pair --code`: two syncpeers that opened a wormhole with the same code swap
/// their identity keys inside it and end paired, with no 6-digit comparison (the code did
/// that work). Each side also proves it holds the private key it names: a proof derived from
/// the X25519 secret of the two static keys and this wormhole's key, one per direction (an
/// echo of ours is not theirs). Only a peer whose version message lists `ability` is asked;
/// a plain Magic Wormhole client gets an error message and nothing else.
package enum WormholePairing {
    package static let ability = "pair-v1"
    static let maxAddresses = 8
    static let maxAddressBytes = 300
    static let maxNameBytes = 63

    /// What the other node said about itself, its key proven.
    package struct Peer: Sendable, Equatable {
        package let publicKey: PublicKey
        package let name: String
        package let addresses: [String]
    }

    /// Swaps identities over an open session (both ends call it) and returns the other's:
    /// first each side's key, name and addresses, then each side's proof.
    package static func exchange(_ session: WormholeSession, keyPair: KeyPair, name: String,
                                addresses: [String]) throws(WormholeError) -> Peer {
        guard session.peerAbilities.contains(ability) else {
            try? session.send(["error": "this code is for 'syncpeer pair --code': run that on the other computer"])
            throw .remote("the other side is not 'syncpeer pair --code' (a plain Magic Wormhole client, or an older syncpeer)")
        }
        try session.send(["syncpeer_pair": ["key": hex(keyPair.publicKey.bytes), "name": name,
                                            "addresses": Array(addresses.prefix(maxAddresses))]])
        guard let body = try session.receive()["syncpeer_pair"] as? [String: Any], let keyText = body["key"] as? String,
              let keyBytes = bytes(fromHex: keyText), let key = try? PublicKey(keyBytes),
              let theirName = body["name"] as? String, !theirName.isEmpty, theirName.utf8.count <= maxNameBytes,
              let theirAddresses = body["addresses"] as? [String], theirAddresses.count <= maxAddresses,
              theirAddresses.allSatisfy({ !$0.isEmpty && $0.utf8.count <= maxAddressBytes })
        else { throw .protocolViolation("a malformed pairing message") }
        guard key != keyPair.publicKey else { throw .protocolViolation("the other side sent this node's own key") }
        let salt = session.deriveKey(purpose: "syncpeer:pair-v1").withUnsafeBytes { Array($0) }
        try session.send(["syncpeer_pair_proof": hex(try proof(salt: salt, keyPair, other: key, fromUs: true))])
        guard let proofText = try session.receive()["syncpeer_pair_proof"] as? String, let theirProof = bytes(fromHex: proofText) else {
            throw .protocolViolation("a malformed pairing proof")
        }
        let expected = try proof(salt: salt, keyPair, other: key, fromUs: false)
        guard theirProof.count == expected.count, zip(theirProof, expected).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0 else {
            throw .protocolViolation("the other side does not hold the key it sent")
        }
        return Peer(publicKey: key, name: theirName, addresses: theirAddresses)
    }

    /// After each side recorded the other: says so and waits for the other to say so (neither
    /// dials before both know each other's key, or the first dial would be an invitation).
    package static func confirmRecorded(_ session: WormholeSession) throws(WormholeError) {
        try session.send(["syncpeer_pair_recorded": true])
        guard try session.receive()["syncpeer_pair_recorded"] as? Bool == true else {
            throw .protocolViolation("the other side did not record the pairing")
        }
    }

    /// A proof: HKDF over the static-static X25519 secret (only the holders of the two private
    /// keys can compute it), salted with this wormhole's key, naming the sender's key first
    /// (ours when `fromUs`), so each direction's proof differs.
    static func proof(salt: [UInt8], _ keyPair: KeyPair, other: PublicKey, fromUs: Bool) throws(WormholeError) -> [UInt8] {
        let secret: SecureBytes
        do { secret = try keyPair.sharedSecret(with: other) } catch { throw .protocolViolation("a bad identity key: \(error)") }
        let (sender, receiver) = fromUs ? (keyPair.publicKey, other) : (other, keyPair.publicKey)
        let derived = HKDFSHA256.derive(inputKeyMaterial: secret, salt: salt,
                                        info: Array("syncpeer pair proof".utf8) + sender.bytes + receiver.bytes, length: 32)
        return derived.withUnsafeBytes { Array($0) }
    }
}

extension WormholePairing.Peer {
    /// The key as the `pair-key` control op takes it.
    package var keyHex: String { hex(publicKey.bytes) }
}
