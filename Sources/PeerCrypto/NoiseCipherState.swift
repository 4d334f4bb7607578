/// Limits shared by every part of the Noise implementation.
package enum Noise {
    /// The largest Noise message, handshake or transport, in bytes (spec section 3).
    package static let maxMessageLength = 65_535
    /// The AEAD tag that every encrypted field carries.
    package static let tagLength = NoiseCipherFunction.tagLength
    /// DHLEN for X25519.
    package static let dhLength = 32
}

/// A Noise `CipherState` (spec section 5.1): a key for one cipher function
/// (ChaCha20-Poly1305 or AES-256-GCM) and a 64-bit nonce.
///
/// Used both inside the handshake (through the symmetric state) and, after `Split()`, as
/// the transport cipher for one direction. Not thread-safe: a cipher state belongs to one
/// task at a time (hand it over with `sending` or keep it inside an actor), because the
/// nonce must never be used twice and concurrent calls could race on it.
package final class NoiseCipherState {
    /// The cipher function.
    package let function: NoiseCipherFunction
    /// The key, or nil while empty (before the first MixKey, encryption is the identity).
    private var key: SecureBytes?
    /// For AES-GCM, the key expanded once into OpenSSL contexts (nil for ChaChaPoly).
    private var aes: AESGCMContext?
    /// The next nonce. 2^64−1 is reserved for Rekey and is never used for a message.
    package private(set) var nonce: UInt64 = 0
    /// Why this cipher may not be used at all (the unused direction of a one-way
    /// pattern); nil for a usable cipher.
    let disabledReason: String?

    /// An empty cipher state (no key), as `InitializeKey(empty)` leaves it.
    package init(_ function: NoiseCipherFunction = .chaChaPoly) {
        self.function = function
        disabledReason = nil
    }

    /// A cipher state holding `key` (32 bytes), nonce 0.
    package init(_ function: NoiseCipherFunction = .chaChaPoly, key: SecureBytes) throws(CryptoError) {
        self.function = function
        disabledReason = nil
        try initializeKey(key)
    }

    /// A cipher that refuses every operation, for a direction the pattern never uses;
    /// an empty key would otherwise "encrypt" as plaintext.
    init(_ function: NoiseCipherFunction, disabled reason: String) {
        self.function = function
        disabledReason = reason
    }

    /// `InitializeKey(key)`: sets the key (nil empties it) and resets the nonce to 0.
    package func initializeKey(_ key: SecureBytes?) throws(CryptoError) {
        if let key, key.count != NoiseCipherFunction.keyLength {
            throw .invalidLength(what: "Noise cipher key", expected: NoiseCipherFunction.keyLength, actual: key.count)
        }
        self.key = key
        aes = key.flatMap { function == .aesGCM ? AESGCMContext(key: $0) : nil }
        nonce = 0
    }

    /// `HasKey()`.
    package var hasKey: Bool { key != nil }

    /// `SetNonce(n)`: for protocols that carry explicit nonces (and for tests).
    package func setNonce(_ nonce: UInt64) {
        self.nonce = nonce
    }

    /// `EncryptWithAd(ad, plaintext)`: with a key, the ciphertext and tag, and the nonce
    /// advances; without a key, the plaintext unchanged (the handshake relies on this).
    package func encryptWithAd(_ ad: some ContiguousBytes, plaintext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
        try checkUsable()
        let length = plaintext.withUnsafeBytes { $0.count }
        guard let key else { return plaintext.withUnsafeBytes { Array($0) } }
        guard length + Noise.tagLength <= Noise.maxMessageLength else {
            throw .unsupported("a Noise ciphertext of \(length + Noise.tagLength) bytes; the maximum message is \(Noise.maxMessageLength) bytes")
        }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        let ciphertext = seal(key: key, nonce: nonce, ad: ad, plaintext: plaintext)
        nonce += 1
        return ciphertext
    }

    /// `DecryptWithAd(ad, ciphertext)`: the plaintext, or `authenticationFailed`.
    ///
    /// The nonce advances only on success, so a forged message cannot desynchronise the
    /// two peers (the caller decides whether to drop the connection).
    package func decryptWithAd(_ ad: some ContiguousBytes, ciphertext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
        try checkUsable()
        let length = ciphertext.withUnsafeBytes { $0.count }
        guard let key else { return ciphertext.withUnsafeBytes { Array($0) } }
        guard length <= Noise.maxMessageLength else {
            throw .unsupported("a Noise ciphertext of \(length) bytes; the maximum message is \(Noise.maxMessageLength) bytes")
        }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        let plaintext: [UInt8]
        if let aes {
            let opened: [UInt8]? = ad.withUnsafeBytes { a in
                ciphertext.withUnsafeBytes { c in
                    guard c.count >= Noise.tagLength else { return nil }
                    var out = [UInt8](repeating: 0, count: max(c.count - Noise.tagLength, 1))
                    guard out.withUnsafeMutableBytes({ aes.open(nonce: nonce, ad: a, ciphertext: c, into: $0.baseAddress!) }) else {
                        return nil
                    }
                    return Array(out.prefix(c.count - Noise.tagLength))
                }
            }
            guard let opened else { throw .authenticationFailed }
            plaintext = opened
        } else {
            plaintext = try ChaChaPoly.open(key: key, nonce: nonce, ad: ad, ciphertext: ciphertext)
        }
        nonce += 1
        return plaintext
    }

    /// Transport encryption without allocation (empty associated data): writes the
    /// ciphertext and tag of `plaintext` (`plaintext.count + 16` bytes) to `output`.
    /// Needs a key.
    package func encrypt(_ plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer) throws(CryptoError) {
        try checkUsable()
        guard let key else { throw .handshake("transport encryption needs a key") }
        guard plaintext.count + Noise.tagLength <= Noise.maxMessageLength else {
            throw .unsupported("a Noise ciphertext of \(plaintext.count + Noise.tagLength) bytes; the maximum message is \(Noise.maxMessageLength) bytes")
        }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        if let aes {
            aes.seal(nonce: nonce, ad: UnsafeRawBufferPointer(start: nil, count: 0), plaintext: plaintext, into: output)
        } else {
            ChaChaPoly.seal(key: key, nonce: nonce, plaintext: plaintext, into: output)
        }
        nonce += 1
    }

    /// `encrypt(_:into:)` of the plaintext `first` followed by `second`, without copying
    /// them together first (`output` must not overlap `second`): a frame's header and its
    /// data where they lie, e.g. in a mapped file.
    package func encrypt(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer,
                         into output: UnsafeMutableRawPointer) throws(CryptoError) {
        guard let aes, key != nil, disabledReason == nil else {
            // (ChaCha20-Poly1305 seals one piece: the two are copied together.)
            var joined = [UInt8](first)
            joined.append(contentsOf: second)
            let sealed = joined.withUnsafeBytes { raw in Result { () throws(CryptoError) in try encrypt(raw, into: output) } }
            try sealed.get()
            return
        }
        guard first.count + second.count + Noise.tagLength <= Noise.maxMessageLength else {
            throw .unsupported("a Noise ciphertext of \(first.count + second.count + Noise.tagLength) bytes; the maximum message is \(Noise.maxMessageLength) bytes")
        }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        aes.seal(nonce: nonce, ad: UnsafeRawBufferPointer(start: nil, count: 0), plaintext: first, second, into: output)
        nonce += 1
    }

    /// Transport decryption without allocation (empty associated data): writes the
    /// `ciphertext.count - 16` bytes of plaintext to `output` (which may be the ciphertext
    /// itself) and returns that count, or throws `authenticationFailed` (the nonce stays).
    /// Needs a key.
    package func decrypt(_ ciphertext: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer) throws(CryptoError) -> Int {
        try checkUsable()
        guard let key else { throw .handshake("transport decryption needs a key") }
        guard ciphertext.count <= Noise.maxMessageLength else {
            throw .unsupported("a Noise ciphertext of \(ciphertext.count) bytes; the maximum message is \(Noise.maxMessageLength) bytes")
        }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        let opened = if let aes {
            aes.open(nonce: nonce, ad: UnsafeRawBufferPointer(start: nil, count: 0), ciphertext: ciphertext, into: output)
        } else {
            ChaChaPoly.open(key: key, nonce: nonce, ciphertext: ciphertext, into: output)
        }
        guard opened else { throw .authenticationFailed }
        nonce += 1
        return ciphertext.count - Noise.tagLength
    }

    /// `Rekey()`: the key becomes the first 32 bytes of ENCRYPT(k, 2^64−1, empty, 32 zero
    /// bytes); the nonce is unchanged (spec sections 4.2 and 11.3).
    ///
    /// Both peers must rekey at the same message position, so the protocol above decides
    /// when (e.g. after a fixed number of messages).
    package func rekey() throws(CryptoError) {
        try checkUsable()
        guard let key else { throw .handshake("cannot rekey a cipher state that has no key") }
        var sealed = seal(key: key, nonce: UInt64.max, ad: [UInt8](), plaintext: [UInt8](repeating: 0, count: 32))
        let newKey = SecureBytes(sealed[0..<NoiseCipherFunction.keyLength])
        wipe(&sealed)
        self.key = newKey
        if function == .aesGCM { aes = AESGCMContext(key: newKey) }
    }

    /// Transport convenience: encrypts with empty associated data.
    package func encrypt(_ plaintext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
        try encryptWithAd([UInt8](), plaintext: plaintext)
    }

    /// Transport convenience: decrypts with empty associated data.
    package func decrypt(_ ciphertext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
        try decryptWithAd([UInt8](), ciphertext: ciphertext)
    }

    /// ENCRYPT(k, n, ad, plaintext) of this state's cipher function.
    private func seal(key: SecureBytes, nonce: UInt64, ad: some ContiguousBytes, plaintext: some ContiguousBytes) -> [UInt8] {
        guard let aes else { return ChaChaPoly.seal(key: key, nonce: nonce, ad: ad, plaintext: plaintext) }
        return plaintext.withUnsafeBytes { p in
            var out = [UInt8](repeating: 0, count: p.count + Noise.tagLength)
            ad.withUnsafeBytes { a in
                out.withUnsafeMutableBytes { o in aes.seal(nonce: nonce, ad: a, plaintext: p, into: o.baseAddress!) }
            }
            return out
        }
    }

    private func checkUsable() throws(CryptoError) {
        if let disabledReason { throw .handshake(disabledReason) }
    }
}
