/// HMAC (RFC 2104) and the Noise HKDF (Noise spec rev. 34, section 4.3) over a Noise hash
/// function (BLAKE2b-512 or SHA-256).
///
/// Noise defines its key derivation on top of HMAC-HASH rather than keyed BLAKE2b, so
/// that every hash function it supports derives keys the same way; using BLAKE2b's own
/// key input here would give different (incompatible) keys.
package enum NoiseHMAC {
    /// HMAC-HASH of the concatenation of `message` parts under `key`; HASHLEN bytes.
    ///
    /// Parts avoid building concatenations (`output || byte`) in temporary arrays that
    /// would hold secret material.
    package static func authenticationCode(_ function: NoiseHashFunction, key: some ContiguousBytes,
                                          message parts: [any ContiguousBytes]) -> SecureBytes {
        let blockLength = function.blockLength
        // K0: keys longer than the block are hashed first, then zero-padded to the block.
        var k0 = [UInt8](repeating: 0, count: blockLength)
        key.withUnsafeBytes { k in
            if k.count > blockLength {
                var keyCopy = Array(k)
                var longKey = function.hash(parts: [keyCopy])
                wipe(&keyCopy)
                k0.replaceSubrange(0..<longKey.count, with: longKey)
                wipe(&longKey)
            } else {
                for i in 0..<k.count { k0[i] = k.load(fromByteOffset: i, as: UInt8.self) }
            }
        }
        var innerPad = k0.map { $0 ^ 0x36 }
        var outerPad = k0.map { $0 ^ 0x5c }
        wipe(&k0)
        defer {
            wipe(&innerPad)
            wipe(&outerPad)
        }
        var innerDigest = function.hash(parts: [innerPad] + parts)
        defer { wipe(&innerDigest) }
        var mac = function.hash(parts: [outerPad, innerDigest])
        defer { wipe(&mac) }
        return SecureBytes(mac)
    }

    /// The Noise `HKDF(chaining_key, input_key_material, num_outputs)`: 2 or 3 outputs of
    /// HASHLEN bytes each.
    ///
    /// This is HKDF (RFC 5869) with an empty info string and a single expansion pass per
    /// output, as section 4.3 of the Noise spec defines it.
    package static func hkdf(_ function: NoiseHashFunction, chainingKey: some ContiguousBytes,
                            inputKeyMaterial: some ContiguousBytes, outputs: Int) -> [SecureBytes] {
        precondition(outputs == 2 || outputs == 3, "Noise HKDF produces 2 or 3 outputs")
        let tempKey = authenticationCode(function, key: chainingKey, message: [inputKeyMaterial])
        var results: [SecureBytes] = []
        var previous: [UInt8] = []
        for index in 1...outputs {
            let next = authenticationCode(function, key: tempKey, message: [previous, [UInt8(index)]])
            results.append(next)
            wipe(&previous)
            previous = next.unsafeCopy()
        }
        wipe(&previous)
        return results
    }
}

/// HMAC-BLAKE2b-512 and its Noise HKDF (protocol version 1's key derivation).
package enum HMACBLAKE2b {
    /// HASHLEN: the BLAKE2b-512 digest length, which is also the HMAC output length.
    package static let outputLength = 64
    /// The HMAC block length B for BLAKE2b.
    package static let blockLength = BLAKE2b.blockLength

    /// HMAC-BLAKE2b-512 of the concatenation of `message` parts under `key`.
    package static func authenticationCode(key: some ContiguousBytes, message parts: [any ContiguousBytes]) -> SecureBytes {
        NoiseHMAC.authenticationCode(.blake2b, key: key, message: parts)
    }

    /// HMAC-BLAKE2b-512 of a single message.
    package static func authenticationCode(key: some ContiguousBytes, message: some ContiguousBytes) -> SecureBytes {
        NoiseHMAC.authenticationCode(.blake2b, key: key, message: [message])
    }

    /// The Noise HKDF over HMAC-BLAKE2b-512: 2 or 3 outputs of 64 bytes each.
    package static func hkdf(chainingKey: some ContiguousBytes, inputKeyMaterial: some ContiguousBytes, outputs: Int) -> [SecureBytes] {
        NoiseHMAC.hkdf(.blake2b, chainingKey: chainingKey, inputKeyMaterial: inputKeyMaterial, outputs: outputs)
    }
}
