/// HKDF (RFC 5869) over HMAC-SHA-256 with a salt, an info string and any output length:
/// the key derivation of SPAKE2 and Magic Wormhole (Python's `hkdf.Hkdf`).
///
/// The Noise HKDF in `HMAC+HKDF.swift` is a fixed two- or three-output form with no info;
/// this is the general one.
package enum HKDFSHA256 {
    /// At most 255 blocks of output (RFC 5869, section 2.3).
    package static let maximumLength = 255 * SHA256.digestLength

    /// `length` bytes of key material from `inputKeyMaterial`, `salt` (empty means
    /// HASHLEN zero bytes, which HMAC treats alike) and `info`.
    package static func derive(inputKeyMaterial: some ContiguousBytes, salt: [UInt8] = [],
                              info: [UInt8], length: Int) -> SecureBytes {
        precondition(length >= 0 && length <= maximumLength, "HKDF output too long")
        let prk = NoiseHMAC.authenticationCode(.sha256, key: salt, message: [inputKeyMaterial])
        var output: [UInt8] = []
        var previous: [UInt8] = []
        var counter: UInt8 = 1
        while output.count < length {
            let block = NoiseHMAC.authenticationCode(.sha256, key: prk, message: [previous, info, [counter]])
            wipe(&previous)
            previous = block.unsafeCopy()
            output += previous
            counter &+= 1
        }
        wipe(&previous)
        defer { wipe(&output) }
        return SecureBytes(output[0..<length])
    }
}
