/// A device as Syncthing's relays and global discovery servers know it: the SHA-256 of its
/// TLS certificate (DER), written as Syncthing writes device IDs:
///
///     SHA-256 (32 bytes) → base32 (52 chars, no padding) → 4 × (13 chars + 1 check) → 8 groups of 7
///
/// The layout is syncpeer's `DeviceID`'s, but the hash differs (SHA-256 of a certificate, not
/// BLAKE2b of a key) and so does the check character: Syncthing's "Luhn mod 32" weighs the
/// characters from the left starting at 1 (see `luhnCheckCharacter`), so the two kinds of ID
/// never check as each other. A relay or discovery server's ID is one too (of its certificate).
package struct CertificateID: Sendable, Hashable, CustomStringConvertible {
    /// The SHA-256 of the certificate.
    package let hash: [UInt8]

    /// The ID of a certificate in DER.
    package init(certificate der: some ContiguousBytes) {
        hash = SHA256.hash(der)
    }

    /// The ID of a 32-byte hash (as relays send it); nil for any other length.
    package init?(hash: [UInt8]) {
        guard hash.count == SHA256.digestLength else { return nil }
        self.hash = hash
    }

    /// Parses an ID as people and URLs write it (`…?id=XXXXXXX-…`): upper or lower case,
    /// dashes and spaces anywhere, 56 characters with check characters.
    package init(parsing text: String) throws(CryptoError) {
        hash = try DeviceID.decodeChecked(DeviceID.idCharacters(text), check: Self.luhnCheckCharacter)
    }

    package var description: String { DeviceID.checkedText(hash, check: Self.luhnCheckCharacter) }

    /// Syncthing's check character (lib/protocol's luhn32): from the left, factors 1, 2, 1, …
    static func luhnCheckCharacter(_ group: [UInt8]) -> UInt8 {
        let n = 32
        var factor = 1
        var sum = 0
        for c in group {
            let codePoint = DeviceID.alphabet.firstIndex(of: c) ?? 0
            var addend = factor * codePoint
            factor = factor == 2 ? 1 : 2
            addend = addend / n + addend % n
            sum += addend
        }
        return DeviceID.alphabet[(n - sum % n) % n]
    }
}
