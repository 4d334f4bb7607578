/// The Noise hash functions syncpeer implements (spec section 12.5 and 12.6).
package enum NoiseHashFunction: String, Sendable, Hashable, CaseIterable {
    /// BLAKE2b-512 (libsodium): HASHLEN 64, BLOCKLEN 128. Protocol version 1's hash.
    case blake2b = "BLAKE2b"
    /// SHA-256 (OpenSSL, SHA-NI): HASHLEN 32, BLOCKLEN 64. Protocol version 2's hash.
    case sha256 = "SHA256"

    /// HASHLEN: the digest length, which is also the length of `h` and `ck`.
    package var hashLength: Int {
        switch self {
        case .blake2b: 64
        case .sha256: SHA256.digestLength
        }
    }

    /// BLOCKLEN: the HMAC block length.
    package var blockLength: Int {
        switch self {
        case .blake2b: BLAKE2b.blockLength
        case .sha256: SHA256.blockLength
        }
    }

    /// `HASH(parts...)`: the digest of the concatenation, with no copy made.
    package func hash(parts: [any ContiguousBytes]) -> [UInt8] {
        switch self {
        case .blake2b: BLAKE2b.hash(parts: parts, length: hashLength)
        case .sha256: SHA256.hash(parts: parts)
        }
    }
}

/// The Noise cipher functions syncpeer implements (spec sections 12.3 and 12.4); both
/// take a 32-byte key and add a 16-byte tag.
package enum NoiseCipherFunction: String, Sendable, Hashable, CaseIterable {
    /// ChaCha20-Poly1305 (libsodium), little-endian nonce. Protocol version 1's cipher.
    case chaChaPoly = "ChaChaPoly"
    /// AES-256-GCM (OpenSSL, AES-NI), big-endian nonce. Protocol version 2's cipher.
    case aesGCM = "AESGCM"

    package static let keyLength = 32
    package static let tagLength = 16
}
