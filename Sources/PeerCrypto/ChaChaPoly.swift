internal import CSodium

/// ChaCha20-Poly1305 (IETF, RFC 8439) as Noise uses it: a 32-byte key, and a 96-bit nonce
/// made of 4 zero bytes followed by a 64-bit little-endian counter.
package enum ChaChaPoly {
    package static let keyLength = 32
    package static let tagLength = 16

    /// Encrypts `plaintext` with associated data `ad`; returns ciphertext followed by the tag.
    package static func seal(key: SecureBytes, nonce: UInt64, ad: some ContiguousBytes, plaintext: some ContiguousBytes) -> [UInt8] {
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
    package static func open(key: SecureBytes, nonce: UInt64, ad: some ContiguousBytes, ciphertext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
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

    /// Encrypts `plaintext` into `output`, which receives `plaintext.count + tagLength`
    /// bytes (ciphertext, then tag) and may not overlap `plaintext` except exactly (in
    /// place). No allocation: the transport's hot path.
    package static func seal(key: SecureBytes, nonce: UInt64, plaintext: UnsafeRawBufferPointer,
                            into output: UnsafeMutableRawPointer) {
        Sodium.ensure()
        precondition(key.count == keyLength)
        withNoiseNonce(nonce) { n in
            key.withUnsafeBytes { k in
                let message = plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self)
                let out = output.assumingMemoryBound(to: UInt8.self)
                var tagLen: UInt64 = 0
                _ = crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                    out, out + plaintext.count, &tagLen,
                    message, UInt64(plaintext.count), nil, 0, nil,
                    n, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    /// Verifies and decrypts `ciphertext` (ciphertext then tag) into `output`, which
    /// receives `ciphertext.count - tagLength` bytes (it may be `ciphertext` itself: in
    /// place). False when the tag does not match; nothing is written then.
    package static func open(key: SecureBytes, nonce: UInt64, ciphertext: UnsafeRawBufferPointer,
                            into output: UnsafeMutableRawPointer) -> Bool {
        Sodium.ensure()
        precondition(key.count == keyLength)
        guard ciphertext.count >= tagLength, let base = ciphertext.baseAddress else { return false }
        let bodyCount = ciphertext.count - tagLength
        let c = base.assumingMemoryBound(to: UInt8.self)
        return withNoiseNonce(nonce) { n in
            key.withUnsafeBytes { k in
                crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                    output.assumingMemoryBound(to: UInt8.self), nil,
                    c, UInt64(bodyCount), c + bodyCount, nil, 0,
                    n, k.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
            }
        }
    }

    /// The Noise nonce on the stack: three little-endian 32-bit words, the first zero.
    private static func withNoiseNonce<R>(_ counter: UInt64, _ body: (UnsafePointer<UInt8>) -> R) -> R {
        var words: (UInt32, UInt32, UInt32) = (0, UInt32(truncatingIfNeeded: counter).littleEndian,
                                               UInt32(truncatingIfNeeded: counter >> 32).littleEndian)
        return withUnsafeBytes(of: &words) { body($0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
    }

    /// 4 zero bytes then the counter, little-endian (Noise spec, section 12.3).
    static func noiseNonce(_ counter: UInt64) -> [UInt8] {
        var n = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { n[4 + i] = UInt8(truncatingIfNeeded: counter >> (8 * UInt64(i))) }
        return n
    }
}
