/// A short code two people compare (read aloud, or side by side on screens) to check that
/// their devices talk to each other directly, with no one in the middle.
///
/// Both ends of a Noise handshake derive it from the final handshake hash `h`, which covers
/// every key exchanged. A man in the middle runs two separate handshakes, one with each end,
/// so the two hashes, and with overwhelming likelihood the two codes, differ
/// (a guess matches with probability 10⁻⁶ per attempt).
///
///     code = BE32(BLAKE2b-256("syncpeer-sas" ‖ h)[0..<4]) mod 1,000,000, as 6 decimal digits
package enum ShortAuthenticationString {
    /// Domain separation, so the code is never the same bytes as another use of `h`.
    package static let label: [UInt8] = Array("syncpeer-sas".utf8)
    /// Number of decimal digits in a code.
    package static let digitCount = 6

    /// The 6-digit code (zero-padded, e.g. `"023522"`) for a handshake hash.
    package static func derive(handshakeHash: [UInt8]) -> String {
        let digest = BLAKE2b.hash(parts: [label, handshakeHash], length: 32)
        let value = UInt32(digest[0]) << 24 | UInt32(digest[1]) << 16 | UInt32(digest[2]) << 8 | UInt32(digest[3])
        let digits = String(value % 1_000_000)
        return String(repeating: "0", count: digitCount - digits.count) + digits
    }
}
