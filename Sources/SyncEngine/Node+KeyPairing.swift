internal import PeerCrypto

extension Node {
    /// Pairs with the node whose identity key is `key` (hex), as `pair --code` learned it
    /// through a wormhole the user's code authenticated: the key is pinned at once (no
    /// invitation, no 6-digit comparison), `addresses` stored for dialling it (`connect`).
    package func pair(key: String, name: String, addresses: [String]) throws(EngineError) -> PeerRef {
        guard let bytes = bytes(fromHex: key), let publicKey = try? PublicKey(bytes) else {
            throw .invalidArgument("'pair-key': \"key\" must be 64 hex digits (an X25519 public key)")
        }
        return try connections.pin(publicKey: publicKey, name: try DisplayName.validate(name), addresses: addresses)
    }
}
