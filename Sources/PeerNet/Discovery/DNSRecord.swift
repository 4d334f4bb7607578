/// An IPv4 address (four bytes, network order), as in A records.
package struct IPv4Address: Hashable, Sendable, Comparable, CustomStringConvertible {
    package let bytes: (UInt8, UInt8, UInt8, UInt8)

    package init(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
        bytes = (a, b, c, d)
    }

    /// Parses dotted-quad text ("10.0.0.1"); nil for anything else.
    package init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var values: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = UInt8(part) else { return nil }
            values.append(value)
        }
        self.init(values[0], values[1], values[2], values[3])
    }

    package var array: [UInt8] { [bytes.0, bytes.1, bytes.2, bytes.3] }

    package var description: String { "\(bytes.0).\(bytes.1).\(bytes.2).\(bytes.3)" }

    package static func == (l: IPv4Address, r: IPv4Address) -> Bool { l.array == r.array }
    package func hash(into hasher: inout Hasher) { hasher.combine(array) }
    package static func < (l: IPv4Address, r: IPv4Address) -> Bool { l.array.lexicographicallyPrecedes(r.array) }
}

/// DNS record types used by DNS-SD (others are kept as raw `UInt16`).
package enum DNSRecordType {
    package static let a: UInt16 = 1
    package static let ptr: UInt16 = 12
    package static let txt: UInt16 = 16
    package static let aaaa: UInt16 = 28
    package static let srv: UInt16 = 33
    package static let nsec: UInt16 = 47
    /// Only in questions: every type.
    package static let any: UInt16 = 255
}

/// The class IN (Internet), the only one mDNS uses.
package let dnsClassIN: UInt16 = 1

/// The data of a resource record, decoded for the types DNS-SD uses.
package enum DNSRecordData: Hashable, Sendable {
    case a(IPv4Address)
    /// 16 bytes.
    case aaaa([UInt8])
    case ptr(DNSName)
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName)
    /// The character-strings, each at most 255 bytes. An empty list encodes as one zero byte.
    case txt([[UInt8]])
    /// Decoded on reading; written without compression.
    case nsec(next: DNSName, types: [UInt16])
    /// Any other type: the bytes as received (names inside are not decompressed).
    case unknown(type: UInt16, data: [UInt8])

    /// The record type these data belong to.
    package var type: UInt16 {
        switch self {
        case .a: return DNSRecordType.a
        case .aaaa: return DNSRecordType.aaaa
        case .ptr: return DNSRecordType.ptr
        case .srv: return DNSRecordType.srv
        case .txt: return DNSRecordType.txt
        case .nsec: return DNSRecordType.nsec
        case let .unknown(type, _): return type
        }
    }
}

/// A question: name, type, class, and the unicast-response ("QU") bit, which is the top
/// bit of the class field in mDNS (RFC 6762 §5.4).
package struct DNSQuestion: Hashable, Sendable {
    package var name: DNSName
    package var type: UInt16
    /// The class without the QU bit (normally `dnsClassIN`).
    package var recordClass: UInt16
    package var unicastResponse: Bool

    package init(name: DNSName, type: UInt16, recordClass: UInt16 = dnsClassIN, unicastResponse: Bool = false) {
        self.name = name
        self.type = type
        self.recordClass = recordClass
        self.unicastResponse = unicastResponse
    }

    /// Whether `record` answers this question (same name, matching type and class).
    package func isAnswered(by record: DNSResourceRecord) -> Bool {
        (type == DNSRecordType.any || type == record.type)
            && (recordClass == 255 || recordClass == record.recordClass)
            && name == record.name
    }
}

/// A resource record. In mDNS the top bit of the class is the cache-flush bit
/// (RFC 6762 §10.2): this record replaces every other of the same name, type and class.
package struct DNSResourceRecord: Hashable, Sendable {
    package var name: DNSName
    /// The class without the cache-flush bit.
    package var recordClass: UInt16
    package var cacheFlush: Bool
    /// Seconds; 0 in a response means goodbye.
    package var ttl: UInt32
    package var data: DNSRecordData

    package init(name: DNSName, data: DNSRecordData, ttl: UInt32, cacheFlush: Bool = false,
                recordClass: UInt16 = dnsClassIN) {
        self.name = name
        self.data = data
        self.ttl = ttl
        self.cacheFlush = cacheFlush
        self.recordClass = recordClass
    }

    package var type: UInt16 { data.type }

    /// Same name, class, type and data (TTL and cache-flush bit ignored): "the same record".
    package func isSameRecord(as other: DNSResourceRecord) -> Bool {
        name == other.name && recordClass == other.recordClass && data == other.data
    }
}

// MARK: TXT helpers

extension DNSRecordData {
    /// TXT strings from "key=value" pairs (sorted by key for a stable encoding).
    package static func txt(pairs: [(String, String)]) -> DNSRecordData {
        .txt(pairs.map { Array("\($0.0)=\($0.1)".utf8) })
    }
}

/// Decodes TXT strings into keys and values (RFC 6763 §6.3–6.5): keys compare
/// case-insensitively, the first occurrence of a key wins, a string without "=" is a
/// boolean key with an empty value, strings starting with "=" are ignored.
package func txtDictionary(_ strings: [[UInt8]]) -> [String: String] {
    var result: [String: String] = [:]
    var seen = Set<String>()
    for string in strings where !string.isEmpty {
        let key: [UInt8]
        let value: [UInt8]
        if let eq = string.firstIndex(of: UInt8(ascii: "=")) {
            key = Array(string[..<eq])
            value = Array(string[(eq + 1)...])
        } else {
            key = string
            value = []
        }
        guard !key.isEmpty else { continue }
        let keyText = String(decoding: key, as: UTF8.self)
        let folded = String(decoding: key.map(asciiLower), as: UTF8.self)
        guard seen.insert(folded).inserted else { continue }
        result[keyText] = String(decoding: value, as: UTF8.self)
    }
    return result
}
