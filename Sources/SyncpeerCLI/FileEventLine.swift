internal import SyncEngine

/// The JSON line of a `file` event, written by hand: byte for byte what `OutputSink.jsonLine`
/// makes of it (sorted keys, absent optionals left out, slashes not escaped), without the
/// `JSONEncoder`. A pull streams two of these per file (`syncing`, `pulled`) from
/// `syncpeer daemon --json`: the encoder was 0.25 CPU-s of bob's ~9.5 in workload D
/// (50,000 files), ~2.5 µs a line; this is a tenth of that. Every other event goes
/// through the encoder.
enum FileEventLine {
    /// The line (with its newline) for a `file` event; nil for any other event.
    static func line(_ event: NodeEvent) -> String? {
        guard case let .file(change) = event else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(160 + change.path.utf8.count)
        // Keys in the encoder's sorted order: bytes, copy, event, folder, name, path, reason, state, time, total.
        out.append(UInt8(ascii: "{"))
        if let bytes = change.bytes { number("bytes", bytes, &out) }
        if let copy = change.copy { text("copy", copy, &out) }
        text("event", "file", &out)
        text("folder", change.folder, &out)
        text("name", change.name, &out)
        text("path", change.path, &out)
        if let reason = change.reason { text("reason", reason, &out) }
        text("state", change.state.rawValue, &out)
        number("time", change.time, &out)
        if let total = change.total { number("total", total, &out) }
        out.append(UInt8(ascii: "}"))
        out.append(UInt8(ascii: "\n"))
        return String(decoding: out, as: UTF8.self)
    }

    private static func key(_ name: StaticString, _ out: inout [UInt8]) {
        if out.count > 1 { out.append(UInt8(ascii: ",")) }
        out.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { out.append(contentsOf: $0) }
        out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }

    private static func number(_ name: StaticString, _ value: Int64, _ out: inout [UInt8]) {
        key(name, &out)
        out.append(contentsOf: String(value).utf8)
    }

    private static func text(_ name: StaticString, _ value: String, _ out: inout [UInt8]) {
        key(name, &out)
        escaped(value, &out)
    }

    /// `value` as a JSON string, escaped as the encoder escapes it: `"` and `\`, the control
    /// characters with a short form (\b \f \n \r \t), the others as \u00xx; the rest as it is.
    static func escaped(_ value: String, _ out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                        hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
