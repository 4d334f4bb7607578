/// The JSON text of a version vector as stored in `files.version` and `remote_files.version`:
/// a compact object `{"DEVICE":counter,…}` with keys in byte order, so equal vectors are
/// equal text. Written by hand (no Foundation): it runs for every file of a 100,000-file scan.
package enum VersionJSON {
    /// Compact JSON object with keys sorted by their UTF-8 bytes; entries are kept as given (zeros too).
    package static func encode(_ version: [String: UInt64]) -> String {
        if version.isEmpty { return "{}" }
        var out = "{"
        var first = true
        for key in version.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            if !first { out.append(",") }
            first = false
            appendQuoted(key, to: &out)
            out.append(":")
            out.append(String(version[key]!))
        }
        out.append("}")
        return out
    }

    /// Parses a JSON object whose values are non-negative integers that fit in UInt64.
    /// Whitespace is allowed between tokens; anything else (fractions, exponents,
    /// negative numbers, duplicate keys, trailing text) gives nil.
    package static func decode(_ text: String) -> [String: UInt64]? {
        var parser = Parser(bytes: Array(text.utf8))
        return parser.object()
    }

    private static func appendQuoted(_ key: String, to out: inout String) {
        out.append("\"")
        // Device IDs need no escape: appended whole (scalar by scalar was ~2 µs a record).
        if key.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            out.append(key)
            out.append("\"")
            return
        }
        for scalar in key.unicodeScalars {
            switch scalar {
            case "\"": out.append("\\\"")
            case "\\": out.append("\\\\")
            case "\n": out.append("\\n")
            case "\r": out.append("\\r")
            case "\t": out.append("\\t")
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out.append("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out.append("\"")
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func object() -> [String: UInt64]? {
            skipSpace()
            guard take(UInt8(ascii: "{")) else { return nil }
            var result: [String: UInt64] = [:]
            skipSpace()
            if take(UInt8(ascii: "}")) { return atEnd() ? result : nil }
            while true {
                skipSpace()
                guard let key = string() else { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard let value = number(), result[key] == nil else { return nil }
                result[key] = value
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                return atEnd() ? result : nil
            }
        }

        mutating func atEnd() -> Bool {
            skipSpace()
            return i == bytes.count
        }

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard i < bytes.count, bytes[i] == byte else { return false }
            i += 1
            return true
        }

        mutating func number() -> UInt64? {
            let start = i
            var value: UInt64 = 0
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
                let (times, o1) = value.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times.addingReportingOverflow(UInt64(bytes[i] - 0x30))
                guard !o1, !o2 else { return nil }
                value = sum
                i += 1
            }
            let digits = i - start
            // JSON: at least one digit, no leading zeros; no fraction or exponent here.
            guard digits > 0, !(digits > 1 && bytes[start] == 0x30) else { return nil }
            if i < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[i]) { return nil }
            return value
        }

        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            // Fast path, every key we write: no escape up to the closing quote.
            var end = i
            while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\"), bytes[end] >= 0x20 {
                end += 1
            }
            if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
                guard let text = String(validating: bytes[i..<end], as: UTF8.self) else { return nil }
                i = end + 1
                return text
            }
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            func flush(_ raw: inout [UInt8], into scalars: inout String.UnicodeScalarView) -> Bool {
                guard !raw.isEmpty else { return true }
                guard let text = String(validating: raw, as: UTF8.self) else { return false }
                scalars.append(contentsOf: text.unicodeScalars)
                raw.removeAll(keepingCapacity: true)
                return true
            }
            while i < bytes.count {
                let byte = bytes[i]
                i += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard flush(&raw, into: &scalars) else { return nil }
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    guard flush(&raw, into: &scalars), i < bytes.count else { return nil }
                    let escape = bytes[i]
                    i += 1
                    switch escape {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{08}")
                    case UInt8(ascii: "f"): scalars.append("\u{0C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        guard let unit = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(unit) {
                            guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(),
                                  (0xDC00..<0xE000).contains(low) else { return nil }
                            let value = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                            guard let scalar = Unicode.Scalar(value) else { return nil }
                            scalars.append(scalar)
                        } else {
                            guard let scalar = Unicode.Scalar(unit) else { return nil }
                            scalars.append(scalar)
                        }
                    default: return nil
                    }
                case 0x00..<0x20:
                    return nil
                default:
                    raw.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard i + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[i]
                let digit: UInt32
                switch b {
                case 0x30...0x39: digit = UInt32(b - 0x30)
                case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
                default: return nil
                }
                value = value << 4 | digit
                i += 1
            }
            return value
        }
    }
}
