internal import CSodium

/// NaCl's SecretBox (XSalsa20-Poly1305, libsodium `crypto_secretbox_easy`), as Magic
/// Wormhole frames it: `nonce(24) || tag(16) || ciphertext`.
package struct SecretBox: Sendable {
    package static let keyLength = 32
    package static let nonceLength = 24
    package static let tagLength = 16
    /// Bytes a sealed box adds to its plaintext.
    package static let overhead = nonceLength + tagLength

    private let key: SecureBytes

    /// A box under a 32-byte key.
    package init(key: SecureBytes) throws {
        guard key.count == Self.keyLength else {
            throw CryptoError.invalidLength(what: "SecretBox key", expected: Self.keyLength, actual: key.count)
        }
        self.key = key
    }

    /// Seals `plaintext` under `nonce` (random when nil) and returns nonce, tag and ciphertext.
    package func seal(_ plaintext: some ContiguousBytes, nonce: [UInt8]? = nil) -> [UInt8] {
        Sodium.ensure()
        let nonce = nonce ?? Sodium.randomBytes(Self.nonceLength)
        precondition(nonce.count == Self.nonceLength, "SecretBox nonce must be 24 bytes")
        return plaintext.withUnsafeBytes { p in
            var out = [UInt8](repeating: 0, count: Self.overhead + p.count)
            out.replaceSubrange(0..<Self.nonceLength, with: nonce)
            out.withUnsafeMutableBytes { o in
                key.withUnsafeBytes { k in
                    _ = crypto_secretbox_easy(o.baseAddress!.advanced(by: Self.nonceLength).assumingMemoryBound(to: UInt8.self),
                                              p.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(p.count),
                                              nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            return out
        }
    }

    /// Opens `nonce || tag || ciphertext`; throws `authenticationFailed` on a wrong key or
    /// changed bytes.
    package func open(_ box: some ContiguousBytes) throws -> [UInt8] {
        Sodium.ensure()
        return try box.withUnsafeBytes { b in
            guard b.count >= Self.overhead else { throw CryptoError.authenticationFailed }
            // One spare byte so an empty plaintext still has a buffer to point at.
            var out = [UInt8](repeating: 0, count: b.count - Self.overhead + 1)
            let base = b.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let rc = out.withUnsafeMutableBytes { o in
                key.withUnsafeBytes { k in
                    crypto_secretbox_open_easy(o.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                               base + Self.nonceLength, UInt64(b.count - Self.nonceLength),
                                               base, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            guard rc == 0 else { throw CryptoError.authenticationFailed }
            out.removeLast()
            return out
        }
    }
}
