/// Width of the length prefix in front of a variable-length field.
enum LengthPrefix {
    case u8, u16, u32
}

/// A forward-only big-endian cursor over a range of a byte array.
///
/// Every read checks that its bytes are present (``WireError/truncated(field:)``), and every
/// length-prefixed read checks the announced length against a limit before it copies anything.
/// Holding the array shares its storage (copy-on-write); nothing is copied until a field is read.
struct ByteReader {
    private let storage: [UInt8]
    private(set) var position: Int
    let end: Int

    /// A reader over `storage[range]` (the whole array by default).
    init(_ storage: [UInt8], range: Range<Int>? = nil) {
        let range = range ?? storage.indices
        precondition(range.lowerBound >= 0 && range.upperBound <= storage.count)
        self.storage = storage
        self.position = range.lowerBound
        self.end = range.upperBound
    }

    /// Bytes not read yet.
    var remaining: Int { end - position }

    mutating func u8(_ field: String) throws(WireError) -> UInt8 {
        guard remaining >= 1 else { throw .truncated(field: field) }
        defer { position += 1 }
        return storage[position]
    }

    mutating func u16(_ field: String) throws(WireError) -> UInt16 {
        try integer(UInt16.self, field)
    }

    mutating func u32(_ field: String) throws(WireError) -> UInt32 {
        try integer(UInt32.self, field)
    }

    mutating func u64(_ field: String) throws(WireError) -> UInt64 {
        try integer(UInt64.self, field)
    }

    private mutating func integer<T: FixedWidthInteger & UnsignedInteger>(
        _: T.Type, _ field: String
    ) throws(WireError) -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw .truncated(field: field) }
        var value: T = 0
        for index in position..<(position + size) {
            value = value << 8 | T(storage[index])
        }
        position += size
        return value
    }

    /// Exactly `count` bytes.
    mutating func bytes(_ count: Int, _ field: String) throws(WireError) -> [UInt8] {
        guard count >= 0, remaining >= count else { throw .truncated(field: field) }
        defer { position += count }
        return Array(storage[position..<(position + count)])
    }

    /// A length prefix, checked against `limit` (and the bytes left) before anything is copied.
    mutating func length(_ prefix: LengthPrefix, limit: Int, _ field: String) throws(WireError) -> Int {
        let length: Int
        switch prefix {
        case .u8: length = Int(try u8(field + " length"))
        case .u16: length = Int(try u16(field + " length"))
        case .u32: length = Int(try u32(field + " length"))
        }
        guard length <= limit else { throw .fieldTooLong(field: field, length: length, limit: limit) }
        guard length <= remaining else { throw .truncated(field: field) }
        return length
    }

    /// Length-prefixed bytes of at most `limit` bytes.
    mutating func prefixedBytes(_ prefix: LengthPrefix, limit: Int, _ field: String) throws(WireError) -> [UInt8] {
        let count = try length(prefix, limit: limit, field)
        return try bytes(count, field)
    }

    /// Length-prefixed UTF-8 text that follows `rule`.
    mutating func prefixedText(_ prefix: LengthPrefix, rule: TextRule, _ field: String) throws(WireError) -> String {
        let count = try length(prefix, limit: rule.maxBytes, field)
        let range = position..<(position + count)
        guard let text = String(validating: storage[range], as: UTF8.self) else {
            throw .invalidUTF8(field: field)
        }
        try rule.check(text, field)
        position += count
        return text
    }

    /// Throws unless every byte was read.
    func expectEnd(after structure: String) throws(WireError) {
        guard remaining == 0 else { throw .trailingBytes(after: structure, count: remaining) }
    }
}
