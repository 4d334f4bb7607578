/// Why bytes could not be encoded or decoded as syncpeer wire data.
///
/// Any of these on a connection means the peer is broken or hostile (or runs an incompatible
/// version): the connection is closed. Each case carries enough context to say what was wrong.
package enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A Noise message is longer than the transport framing allows.
    case messageTooLarge(length: Int, limit: Int)
    /// A frame header names a frame type this version does not know.
    case unknownFrameType(UInt8)
    /// A frame header announces a body longer than its type allows.
    case frameTooLarge(type: FrameType, length: Int, limit: Int)
    /// A frame header announces a body shorter than its type needs.
    case frameTooShort(type: FrameType, length: Int, minimum: Int)
    /// The bytes ended inside the named field.
    case truncated(field: String)
    /// Bytes were left over after the named structure was complete.
    case trailingBytes(after: String, count: Int)
    /// The named text field is not valid UTF-8.
    case invalidUTF8(field: String)
    /// The named text field contains a control character (an escape sequence could spoof a terminal).
    case controlCharacter(field: String)
    /// The named field is longer than its limit.
    case fieldTooLong(field: String, length: Int, limit: Int)
    /// The named field is shorter than its minimum (for example an empty display name).
    case fieldTooShort(field: String, length: Int, minimum: Int)
    /// The named list has more entries than its limit.
    case tooManyEntries(field: String, count: Int, limit: Int)
    /// The named field holds a value that has no meaning (for example an unknown pairing status).
    case invalidValue(field: String, value: UInt64)
    /// A handshake payload does not start with the hello magic `SPH1`.
    case badMagic
    /// A hello is larger than fits in a Noise handshake message.
    case helloTooLarge(length: Int, limit: Int)

    package var description: String {
        switch self {
        case let .messageTooLarge(length, limit):
            return "A Noise message of \(bytes(length)) is longer than the \(bytes(limit)) the transport framing allows."
        case let .unknownFrameType(code):
            return "The peer sent a frame of unknown type \(hex(code)); it may run an incompatible version of syncpeer."
        case let .frameTooLarge(type, length, limit):
            return "A \(type) frame announced a body of \(bytes(length)), more than the \(bytes(limit)) allowed for that frame type."
        case let .frameTooShort(type, length, minimum):
            return "A \(type) frame announced a body of \(bytes(length)), fewer than the \(bytes(minimum)) that frame type needs."
        case let .truncated(field):
            return "The data ended in the middle of the \(field)."
        case let .trailingBytes(after, count):
            return "\(count) unexpected \(count == 1 ? "byte" : "bytes") followed the \(after)."
        case let .invalidUTF8(field):
            return "The \(field) is not valid UTF-8 text."
        case let .controlCharacter(field):
            return "The \(field) contains a control character, which is not allowed there."
        case let .fieldTooLong(field, length, limit):
            return "The \(field) is \(bytes(length)) long, more than the \(bytes(limit)) allowed."
        case let .fieldTooShort(field, length, minimum):
            if length == 0 && minimum == 1 { return "The \(field) must not be empty." }
            return "The \(field) is \(bytes(length)) long, fewer than the \(bytes(minimum)) required."
        case let .tooManyEntries(field, count, limit):
            return "The \(field) has \(count) entries, more than the \(limit) allowed."
        case let .invalidValue(field, value):
            return "The value \(value) is not a valid \(field)."
        case .badMagic:
            return "The handshake payload is not a syncpeer hello (wrong magic bytes); the peer may not be running syncpeer."
        case let .helloTooLarge(length, limit):
            return "The hello is \(bytes(length)) long, more than the \(bytes(limit)) that fit in a handshake message."
        }
    }
}

private func hex(_ byte: UInt8) -> String {
    let digits = String(byte, radix: 16, uppercase: true)
    return "0x" + (digits.count == 1 ? "0" + digits : digits)
}

private func bytes(_ count: Int) -> String {
    count == 1 ? "1 byte" : "\(count) bytes"
}
