internal import CSodium

/// ChaCha20-Poly1305 (IETF, RFC 8439) as Noise uses it: a 32-byte key, and a 96-bit nonce
/// made of 4 zero bytes followed by a 64-bit little-endian counter.
public enum ChaChaPoly {
    public static let keyLength = 32
    public static let tagLength = 16

    /// Encrypts `plaintext` with associated data `ad`; returns ciphertext followed by the tag.
    public static func seal(key: SecureBytes, nonce: UInt64, ad: some ContiguousBytes, plaintext: some ContiguousBytes) -> [UInt8] {
        Sodium.ensure()
        precondition(key.count == keyLength)
        let n = noiseNonce(nonce)
        return plaintext.withUnsafeBytes { p in
            var out = [UInt8](repeating: 0, count: p.count + tagLength)
            var outLen: UInt64 = 0
            ad.withUnsafeBytes { a in
                key.withUnsafeBytes { k in
                    n.withUnsafeBytes { nb in
                        out.withUnsafeMutableBytes { o in
                            _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                                o.bindMemory(to: UInt8.self).baseAddress!, &outLen,
                                p.bindMemory(to: UInt8.self).baseAddress, UInt64(p.count),
                                a.bindMemory(to: UInt8.self).baseAddress, UInt64(a.count),
                                nil, nb.bindMemory(to: UInt8.self).baseAddress!,
                                k.bindMemory(to: UInt8.self).baseAddress!)
                        }
                    }
                }
            }
            return out
        }
    }

    /// Decrypts and verifies; throws `CryptoError.authenticationFailed` when the tag does
    /// not match (nothing of the plaintext is returned then).
    public static func open(key: SecureBytes, nonce: UInt64, ad: some ContiguousBytes, ciphertext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
        Sodium.ensure()
        precondition(key.count == keyLength)
        let n = noiseNonce(nonce)
        let result: [UInt8]? = ciphertext.withUnsafeBytes { c in
            guard c.count >= tagLength else { return nil }
            var out = [UInt8](repeating: 0, count: c.count - tagLength)
            var outLen: UInt64 = 0
            let rc = ad.withUnsafeBytes { a in
                key.withUnsafeBytes { k in
                    n.withUnsafeBytes { nb in
                        out.withUnsafeMutableBytes { o in
                            crypto_aead_chacha20poly1305_ietf_decrypt(
                                o.bindMemory(to: UInt8.self).baseAddress ?? UnsafeMutablePointer(mutating: nb.bindMemory(to: UInt8.self).baseAddress!), &outLen, nil,
                                c.bindMemory(to: UInt8.self).baseAddress!, UInt64(c.count),
                                a.bindMemory(to: UInt8.self).baseAddress, UInt64(a.count),
                                nb.bindMemory(to: UInt8.self).baseAddress!,
                                k.bindMemory(to: UInt8.self).baseAddress!)
                        }
                    }
                }
            }
            return rc == 0 ? out : nil
        }
        guard let result else { throw .authenticationFailed }
        return result
    }

    /// 4 zero bytes then the counter, little-endian (Noise spec, section 12.3).
    static func noiseNonce(_ counter: UInt64) -> [UInt8] {
        var n = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { n[4 + i] = UInt8(truncatingIfNeeded: counter >> (8 * UInt64(i))) }
        return n
    }
}
