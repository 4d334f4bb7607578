/// Appends big-endian integers and length-prefixed fields to a byte array.
///
/// The writer does not check limits: callers validate values first (``Frame/validate()``,
/// ``Hello/validate()``), and the writer only asserts that a length fits its prefix.
struct ByteWriter {
    var bytes: [UInt8]

    init(bytes: [UInt8] = []) {
        self.bytes = bytes
    }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: UInt16) { integer(value) }
    mutating func u32(_ value: UInt32) { integer(value) }
    mutating func u64(_ value: UInt64) { integer(value) }

    private mutating func integer<T: FixedWidthInteger & UnsignedInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func raw(_ data: some Collection<UInt8>) {
        bytes.append(contentsOf: data)
    }

    mutating func length(_ count: Int, _ prefix: LengthPrefix) {
        switch prefix {
        case .u8: u8(UInt8(count))
        case .u16: u16(UInt16(count))
        case .u32: u32(UInt32(count))
        }
    }

    mutating func prefixedBytes(_ data: [UInt8], _ prefix: LengthPrefix) {
        length(data.count, prefix)
        raw(data)
    }

    mutating func prefixedText(_ text: String, _ prefix: LengthPrefix) {
        let utf8 = text.utf8
        length(utf8.count, prefix)
        raw(utf8)
    }

    /// Overwrites 4 bytes at `offset` with `value`, big-endian (used to patch a frame length).
    mutating func patchU32(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.bigEndian) { source in
            for (index, byte) in source.enumerated() { bytes[offset + index] = byte }
        }
    }
}
