/// PeerCrypto: libsodium behind one module — secret types, X25519 identity keys, device IDs,
/// BLAKE2b hashing and the Noise Protocol Framework. No other module imports CSodium.
public enum PeerCrypto {}
