internal import CSodium

/// An X25519 public key (32 bytes). Public keys are not secret but compare in constant
/// time anyway, so that no code path leaks timing about pinned keys.
package struct PublicKey: Sendable, Hashable, CustomStringConvertible {
    package static let byteCount = 32
    /// The raw key bytes.
    package let bytes: [UInt8]

    package init(_ bytes: some Collection<UInt8>) throws(CryptoError) {
        guard bytes.count == Self.byteCount else {
            throw .invalidLength(what: "X25519 public key", expected: Self.byteCount, actual: bytes.count)
        }
        self.bytes = Array(bytes)
    }

    package static func == (lhs: PublicKey, rhs: PublicKey) -> Bool {
        constantTimeEqual(lhs.bytes, rhs.bytes)
    }

    package func hash(into hasher: inout Hasher) { hasher.combine(bytes) }

    /// Lower-case hex.
    package var description: String { hex(bytes) }
}

/// An X25519 private key (32 bytes) held in wiped memory, with its public key.
package struct KeyPair: Sendable {
    package static let privateByteCount = 32
    package let privateKey: SecureBytes
    package let publicKey: PublicKey

    /// A new random key pair.
    package static func generate() -> KeyPair {
        let secret = SecureBytes.random(count: privateByteCount)
        // A 32-byte scalar always yields a valid public key.
        return try! KeyPair(privateKey: secret)
    }

    /// Derives the public key from a 32-byte private key.
    package init(privateKey: SecureBytes) throws(CryptoError) {
        guard privateKey.count == Self.privateByteCount else {
            throw .invalidLength(what: "X25519 private key", expected: Self.privateByteCount, actual: privateKey.count)
        }
        var pub = [UInt8](repeating: 0, count: PublicKey.byteCount)
        let rc = privateKey.withUnsafeBytes { sk in
            pub.withUnsafeMutableBytes { pk in
                crypto_scalarmult_base(pk.bindMemory(to: UInt8.self).baseAddress!, sk.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        guard rc == 0 else { throw .invalidKey("X25519 private key") }
        self.privateKey = privateKey
        self.publicKey = try PublicKey(pub)
    }

    /// Convenience for known-answer tests: a key pair from raw private bytes.
    package init(privateKeyBytes: [UInt8]) throws(CryptoError) {
        try self.init(privateKey: SecureBytes(privateKeyBytes))
    }

    /// X25519 Diffie-Hellman with a peer's public key (the Noise `DH()` function).
    /// Fails for low-order points that give an all-zero shared secret.
    package func sharedSecret(with peer: PublicKey) throws(CryptoError) -> SecureBytes {
        var failed = false
        let shared = SecureBytes(count: 32) { out in
            let rc = privateKey.withUnsafeBytes { sk in
                peer.bytes.withUnsafeBytes { pk in
                    crypto_scalarmult(out.bindMemory(to: UInt8.self).baseAddress!,
                                      sk.bindMemory(to: UInt8.self).baseAddress!,
                                      pk.bindMemory(to: UInt8.self).baseAddress!)
                }
            }
            failed = rc != 0
        }
        if failed { throw .invalidKey("peer X25519 public key (low-order point)") }
        return shared
    }
}

/// Lower-case hex of bytes.
package func hex(_ bytes: some Sequence<UInt8>) -> String {
    // Written into the string's own storage: before, an array grown digit by digit and a
    // copy (1.5 µs for 32 bytes: 15 ms of a pull of 10,000 files, one temp name each).
    let count = bytes.underestimatedCount
    var iterator = bytes.makeIterator()
    var head = String(unsafeUninitializedCapacity: 2 * count, initializingUTF8With: { (out: UnsafeMutableBufferPointer<UInt8>) -> Int in
        for i in 0..<count {
            guard let b = iterator.next() else { return 2 * i }
            out[2 * i] = hexDigit(b >> 4)
            out[2 * i + 1] = hexDigit(b & 0x0f)
        }
        return 2 * count
    })
    while let b = iterator.next() {
        head.unicodeScalars.append(Unicode.Scalar(hexDigit(b >> 4)))
        head.unicodeScalars.append(Unicode.Scalar(hexDigit(b & 0x0f)))
    }
    return head
}

@inline(__always) private func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? 0x30 + nibble : 0x57 + nibble
}

/// Bytes from hex (either case); nil on odd length or a non-hex character.
package func bytes(fromHex text: String) -> [UInt8]? {
    let utf8 = Array(text.utf8)
    guard utf8.count % 2 == 0 else { return nil }
    func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        case 65...70: return c - 55
        default: return nil
        }
    }
    var out = [UInt8]()
    out.reserveCapacity(utf8.count / 2)
    var i = 0
    while i < utf8.count {
        guard let hi = nibble(utf8[i]), let lo = nibble(utf8[i + 1]) else { return nil }
        out.append(hi << 4 | lo)
        i += 2
    }
    return out
}
