/// Why a DNS message could not be decoded or encoded. Every malformed input ends in
/// one of these (never a crash, never a hang): the parser is fed whatever arrives on
/// UDP port 5353.
package enum DNSError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The message ended inside the named structure (at byte `offset`).
    case truncated(String, offset: Int)
    /// A label length byte used the reserved types 01 or 10 (values 64...191).
    case invalidLabelLength(UInt8, offset: Int)
    /// A label is longer than 63 bytes (encoding) or empty where it must not be.
    case labelTooLong(Int)
    /// An empty label inside a name (encoding).
    case emptyLabel
    /// A name is longer than 255 bytes in wire form.
    case nameTooLong(Int)
    /// A compression pointer points at or past the end of the message.
    case pointerOutOfRange(Int, offset: Int)
    /// A compression pointer points forward (at or after itself): not allowed here.
    case forwardPointer(Int, offset: Int)
    /// Compression pointers form a cycle.
    case pointerLoop(offset: Int)
    /// A record's data does not match its type (e.g. an A record of 5 bytes).
    case badRecordData(type: UInt16, reason: String)
    /// A TXT string is longer than 255 bytes (encoding).
    case txtStringTooLong(Int)
    /// The encoded message would exceed 65,535 bytes or a count would exceed 65,535.
    case messageTooLarge
    /// Bytes follow the last record (only reported when strict decoding is asked for).
    case trailingBytes(Int)
    /// More records than `DNSMessage.maxSkippedRecords` did not parse (tolerant decoding).
    case tooManyBadRecords(Int)

    package var description: String {
        switch self {
        case let .truncated(what, offset): return "DNS message truncated in \(what) at byte \(offset)"
        case let .invalidLabelLength(byte, offset): return "invalid DNS label length byte 0x\(String(byte, radix: 16)) at byte \(offset)"
        case let .labelTooLong(n): return "DNS label of \(n) bytes (at most 63)"
        case .emptyLabel: return "empty DNS label inside a name"
        case let .nameTooLong(n): return "DNS name of \(n) bytes (at most 255)"
        case let .pointerOutOfRange(target, offset): return "DNS compression pointer at byte \(offset) points past the end (\(target))"
        case let .forwardPointer(target, offset): return "DNS compression pointer at byte \(offset) points forward (\(target))"
        case let .pointerLoop(offset): return "DNS compression pointers loop (at byte \(offset))"
        case let .badRecordData(type, reason): return "bad data in DNS record of type \(type): \(reason)"
        case let .txtStringTooLong(n): return "TXT string of \(n) bytes (at most 255)"
        case .messageTooLarge: return "DNS message too large"
        case let .trailingBytes(n): return "\(n) bytes after the last DNS record"
        case let .tooManyBadRecords(n): return "\(n) DNS records do not parse"
        }
    }
}
