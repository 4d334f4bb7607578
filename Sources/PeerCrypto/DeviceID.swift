/// A device's identity as people see and type it: the BLAKE2b-256 hash of its X25519
/// public key, in base32 (RFC 4648 alphabet), with one Luhn mod 32 check character after
/// each 13 characters, written as 8 groups of 7:
///
///     hash (32 bytes) → base32 (52 chars) → 4 × (13 chars + 1 check) → 8 groups of 7
///     e.g. "MFRGGZD-FMZTGNB-..."   (56 characters, 63 with dashes)
///
/// Every single mistyped character and most swaps of two neighbours are caught by the
/// check characters. Parsing accepts lower case, spaces and dashes anywhere.
package struct DeviceID: Sendable, Hashable, Comparable, CustomStringConvertible {
    package static let hashLength = 32
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
    static let dataGroupLength = 13
    static let checkedLength = 56

    /// The 32-byte BLAKE2b-256 of the public key.
    package let hash: [UInt8]

    /// The device ID of a public key.
    package init(publicKey: PublicKey) {
        hash = BLAKE2b.hash(publicKey.bytes, length: Self.hashLength)
    }

    /// Parses a device ID typed by a person; throws with the reason (wrong length, a
    /// character outside the alphabet, or a check character that does not match).
    package init(parsing text: String) throws(CryptoError) {
        hash = try Self.decodeChecked(Self.idCharacters(text), check: Self.luhnCheckCharacter)
    }

    /// The ID characters of `text` in upper case (dashes and spaces dropped).
    static func idCharacters(_ text: String) throws(CryptoError) -> [UInt8] {
        var chars: [UInt8] = []
        for scalar in text.unicodeScalars {
            switch scalar {
            case " ", "-", "\t": continue
            case "a"..."z": chars.append(UInt8(scalar.value) - 32)
            case "A"..."Z", "2"..."7": chars.append(UInt8(scalar.value))
            default:
                throw .invalidDeviceID("'\(scalar.escaped(asASCII: true))' is not a device ID character (A–Z, 2–7)")
            }
        }
        return chars
    }

    /// The 32-byte hash of 56 checked characters: 4 × (13 characters + `check` of them).
    static func decodeChecked(_ chars: [UInt8], check: ([UInt8]) -> UInt8) throws(CryptoError) -> [UInt8] {
        guard chars.count == checkedLength else {
            throw .invalidDeviceID("expected \(checkedLength) characters (8 groups of 7), got \(chars.count)")
        }
        var data: [UInt8] = []
        for group in 0..<4 {
            let start = group * (dataGroupLength + 1)
            let body = Array(chars[start..<start + dataGroupLength])
            guard check(body) == chars[start + dataGroupLength] else {
                throw .invalidDeviceID("check character \(group + 1) of 4 does not match: a character is mistyped")
            }
            data += body
        }
        guard let decoded = base32Decode(data), decoded.count == hashLength else {
            throw .invalidDeviceID("the characters do not encode a 32-byte hash")
        }
        return decoded
    }

    /// The canonical form: 8 groups of 7 upper-case characters joined by dashes.
    package var description: String { Self.checkedText(hash, check: Self.luhnCheckCharacter) }

    /// A 32-byte hash as 8 groups of 7: base32, with `check` after each 13 characters.
    static func checkedText(_ hash: [UInt8], check: ([UInt8]) -> UInt8) -> String {
        let data = base32Encode(hash)
        var checked: [UInt8] = []
        for group in 0..<4 {
            let body = Array(data[group * dataGroupLength..<(group + 1) * dataGroupLength])
            checked += body
            checked.append(check(body))
        }
        var out: [UInt8] = []
        for (i, c) in checked.enumerated() {
            if i > 0 && i % 7 == 0 { out.append(UInt8(ascii: "-")) }
            out.append(c)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The first group, enough to tell devices apart in a list.
    package var shortID: String { String(description.prefix(7)) }

    /// The canonical form without dashes (56 characters), used for prefix matching.
    package var compact: String { String(description.filter { $0 != "-" }) }

    package static func < (lhs: DeviceID, rhs: DeviceID) -> Bool {
        lhs.hash.lexicographicallyPrecedes(rhs.hash)
    }

    // MARK: - Base32 (RFC 4648, no padding)

    static func base32Encode(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for b in bytes {
            buffer = (buffer << 8) | UInt32(b)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(alphabet[Int((buffer >> UInt32(bits)) & 31)])
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return out
    }

    static func base32Decode(_ chars: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for c in chars {
            guard let value = alphabet.firstIndex(of: c) else { return nil }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> UInt32(bits)) & 0xff))
            }
        }
        // Leftover bits must be zero padding, or the text is not a canonical encoding.
        if bits > 0 && (buffer & ((1 << UInt32(bits)) - 1)) != 0 { return nil }
        return out
    }

    /// Luhn mod 32 over code points in `alphabet`: the character that makes the
    /// weighted sum of the group divisible by 32.
    static func luhnCheckCharacter(_ group: [UInt8]) -> UInt8 {
        let n = 32
        var factor = 2
        var sum = 0
        for c in group.reversed() {
            let codePoint = alphabet.firstIndex(of: c) ?? 0
            var addend = factor * codePoint
            factor = factor == 2 ? 1 : 2
            addend = addend / n + addend % n
            sum += addend
        }
        return alphabet[(n - sum % n) % n]
    }
}

/// In JSON a device ID is its canonical text ("MFRGGZD-FMZTGNB-…"); decoding checks it.
extension DeviceID: Codable {
    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do { self = try DeviceID(parsing: text) } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
