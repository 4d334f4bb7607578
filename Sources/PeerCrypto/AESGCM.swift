internal import COpenSSL

/// AES-256-GCM as Noise uses it (spec section 12.4): a 32-byte key, a 96-bit nonce made of
/// 4 zero bytes followed by a 64-bit **big-endian** counter, and a 16-byte tag after the
/// ciphertext. Through OpenSSL libcrypto, which uses AES-NI/VAES and PCLMULQDQ where the
/// CPU has them (about 2.5× libsodium's ChaCha20-Poly1305 on this machine's CPU).
package enum AESGCM {
    package static let keyLength = 32
    package static let tagLength = 16

    /// Encrypts `plaintext` with associated data `ad`; returns ciphertext followed by the tag.
    package static func seal(key: SecureBytes, nonce: UInt64, ad: some ContiguousBytes, plaintext: some ContiguousBytes) -> [UInt8] {
        let context = AESGCMContext(key: key)
        return plaintext.withUnsafeBytes { p in
            var out = [UInt8](repeating: 0, count: p.count + tagLength)
            ad.withUnsafeBytes { a in
                out.withUnsafeMutableBytes { o in context.seal(nonce: nonce, ad: a, plaintext: p, into: o.baseAddress!) }
            }
            return out
        }
    }

    /// Decrypts and verifies; throws `CryptoError.authenticationFailed` when the tag does
    /// not match (nothing of the plaintext is returned then).
    package static func open(key: SecureBytes, nonce: UInt64, ad: some ContiguousBytes, ciphertext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
        let context = AESGCMContext(key: key)
        let result: [UInt8]? = ciphertext.withUnsafeBytes { c in
            guard c.count >= tagLength else { return nil }
            var out = [UInt8](repeating: 0, count: max(c.count - tagLength, 1))
            let ok = ad.withUnsafeBytes { a in
                out.withUnsafeMutableBytes { o in context.open(nonce: nonce, ad: a, ciphertext: c, into: o.baseAddress!) }
            }
            return ok ? Array(out.prefix(c.count - tagLength)) : nil
        }
        guard let result else { throw .authenticationFailed }
        return result
    }
}

/// One AES-256-GCM key, expanded once into two OpenSSL contexts (one to seal, one to
/// open); each message then only sets its nonce. Confined to one task at a time, like the
/// `NoiseCipherState` that owns it. The contexts are freed (and their key schedule
/// cleansed by OpenSSL) with this object.
final class AESGCMContext {
    private let sealer: OpaquePointer
    private let opener: OpaquePointer

    init(key: SecureBytes) {
        precondition(key.count == AESGCM.keyLength)
        guard let sealer = EVP_CIPHER_CTX_new(), let opener = EVP_CIPHER_CTX_new() else {
            fatalError("OpenSSL could not allocate a cipher context (out of memory)")
        }
        self.sealer = sealer
        self.opener = opener
        let ok = key.withUnsafeBytes { k -> Bool in
            let keyBytes = k.baseAddress!.assumingMemoryBound(to: UInt8.self)
            // The default IV length of GCM is 12 bytes, which is Noise's nonce length.
            return EVP_EncryptInit_ex(sealer, EVP_aes_256_gcm(), nil, keyBytes, nil) == 1
                && EVP_DecryptInit_ex(opener, EVP_aes_256_gcm(), nil, keyBytes, nil) == 1
        }
        precondition(ok, "OpenSSL refused an AES-256-GCM key")
    }

    deinit {
        EVP_CIPHER_CTX_free(sealer)
        EVP_CIPHER_CTX_free(opener)
    }

    /// Writes `plaintext.count + 16` bytes (ciphertext, then tag) to `output`, which may be
    /// the plaintext itself (in place).
    func seal(nonce: UInt64, ad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer) {
        seal(nonce: nonce, ad: ad, plaintext: plaintext, UnsafeRawBufferPointer(start: nil, count: 0), into: output)
    }

    /// Seals the plaintext `first` followed by `second` (two places in memory, one message):
    /// `first.count + second.count + 16` bytes to `output`, which must not overlap `second`.
    func seal(nonce: UInt64, ad: UnsafeRawBufferPointer, plaintext first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer,
              into output: UnsafeMutableRawPointer) {
        let out = output.assumingMemoryBound(to: UInt8.self)
        let total = first.count + second.count
        let ok = Self.withNonce(nonce) { iv -> Bool in
            var length: Int32 = 0
            guard EVP_EncryptInit_ex(sealer, nil, nil, nil, iv) == 1 else { return false }
            if ad.count > 0 {
                guard EVP_EncryptUpdate(sealer, nil, &length, ad.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(ad.count)) == 1 else { return false }
            }
            // (GCM is a stream mode: each update writes exactly its input's length.)
            if first.count > 0 {
                guard EVP_EncryptUpdate(sealer, out, &length, first.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(first.count)) == 1,
                      Int(length) == first.count else { return false }
            }
            if second.count > 0 {
                guard EVP_EncryptUpdate(sealer, out + first.count, &length, second.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                        Int32(second.count)) == 1, Int(length) == second.count else { return false }
            }
            guard EVP_EncryptFinal_ex(sealer, out + total, &length) == 1 else { return false }
            return EVP_CIPHER_CTX_ctrl(sealer, EVP_CTRL_GCM_GET_TAG, Int32(AESGCM.tagLength), out + total) == 1
        }
        precondition(ok, "OpenSSL AES-256-GCM encryption failed")
    }

    /// Verifies and decrypts `ciphertext` (ciphertext then tag) into `output` (which may be
    /// the ciphertext itself). False when the tag does not match; `output` is zeroed then,
    /// so no unauthenticated plaintext is left behind.
    func open(nonce: UInt64, ad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer) -> Bool {
        guard ciphertext.count >= AESGCM.tagLength, let base = ciphertext.baseAddress else { return false }
        let bodyCount = ciphertext.count - AESGCM.tagLength
        let c = base.assumingMemoryBound(to: UInt8.self)
        let out = output.assumingMemoryBound(to: UInt8.self)
        // The tag is copied first: decrypting in place overwrites nothing past the body,
        // but OpenSSL's SET_TAG takes a mutable pointer.
        var tag: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &tag) { $0.copyMemory(from: UnsafeRawBufferPointer(start: c + bodyCount, count: AESGCM.tagLength)) }
        let ok = Self.withNonce(nonce) { iv -> Bool in
            var length: Int32 = 0
            guard EVP_DecryptInit_ex(opener, nil, nil, nil, iv) == 1 else { return false }
            if ad.count > 0 {
                guard EVP_DecryptUpdate(opener, nil, &length, ad.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(ad.count)) == 1 else { return false }
            }
            if bodyCount > 0 {
                guard EVP_DecryptUpdate(opener, out, &length, c, Int32(bodyCount)) == 1 else { return false }
            }
            let tagSet = withUnsafeMutableBytes(of: &tag) {
                EVP_CIPHER_CTX_ctrl(opener, EVP_CTRL_GCM_SET_TAG, Int32(AESGCM.tagLength), $0.baseAddress!) == 1
            }
            guard tagSet else { return false }
            return EVP_DecryptFinal_ex(opener, out + bodyCount, &length) == 1
        }
        if !ok && bodyCount > 0 { output.initializeMemory(as: UInt8.self, repeating: 0, count: bodyCount) }
        return ok
    }

    /// The Noise AESGCM nonce on the stack: 4 zero bytes, then the counter big-endian.
    private static func withNonce<R>(_ counter: UInt64, _ body: (UnsafePointer<UInt8>) -> R) -> R {
        var words: (UInt32, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &words) { raw in
            raw.storeBytes(of: 0, toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: counter.bigEndian, toByteOffset: 4, as: UInt64.self)
            return body(raw.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
    }
}
