/// Why a service type or discovery info was refused; each case names the rule.
package enum DiscoveryRuleError: Error, Equatable, Sendable, CustomStringConvertible {
    case serviceTypeEmpty
    case serviceTypeTooLong(Int)
    case serviceTypeInvalidCharacter(Character)
    case serviceTypeNoLetter
    case serviceTypeHyphenAtEdge
    case serviceTypeAdjacentHyphens
    case infoKeyEmpty
    case infoKeyContainsEquals(String)
    case infoKeyReserved(String)
    case infoPairTooLong(key: String, bytes: Int)
    case infoTooLarge(bytes: Int)
    case displayNameLength(Int)
    case hostNameInvalid(String)

    package var description: String {
        switch self {
        case .serviceTypeEmpty:
            return "service type is empty: it must have 1 to 15 characters"
        case let .serviceTypeTooLong(n):
            return "service type has \(n) characters: at most 15 are allowed"
        case let .serviceTypeInvalidCharacter(c):
            return "service type contains \"\(c)\": only lowercase ASCII letters, digits and hyphens are allowed"
        case .serviceTypeNoLetter:
            return "service type has no letter: at least one lowercase ASCII letter is required"
        case .serviceTypeHyphenAtEdge:
            return "service type starts or ends with a hyphen: that is not allowed"
        case .serviceTypeAdjacentHyphens:
            return "service type contains two adjacent hyphens: that is not allowed"
        case .infoKeyEmpty:
            return "discovery info has an empty key: keys must not be empty"
        case let .infoKeyContainsEquals(key):
            return "discovery info key \"\(key)\" contains \"=\": keys must not contain \"=\""
        case let .infoKeyReserved(key):
            return "discovery info key \"\(key)\" is reserved (\"id\" and \"v\" carry the device ID and protocol version)"
        case let .infoPairTooLong(key, bytes):
            return "discovery info pair \"\(key)=…\" is \(bytes) bytes: each key=value pair must be at most 255 bytes"
        case let .infoTooLarge(bytes):
            return "discovery info is \(bytes) bytes in all: the pairs together must be at most 400 bytes"
        case let .displayNameLength(n):
            return "display name is \(n) bytes: it must be 1 to 63 bytes of UTF-8 (one DNS label)"
        case let .hostNameInvalid(name):
            return "host name \"\(name)\" is not one DNS label of 1 to 63 bytes without dots"
        }
    }
}

/// A DNS-SD service type, e.g. "syncpeer" for `_syncpeer._tcp.local`. The rules are
/// those of Apple's Multipeer Connectivity (and RFC 6335 §5.1 service names): 1–15
/// characters, lowercase ASCII letters, digits and hyphens, at least one letter, no
/// hyphen at either end, no two adjacent hyphens.
package struct ServiceType: Hashable, Sendable, CustomStringConvertible {
    /// The type without underscore, e.g. "syncpeer".
    package let name: String

    package init(_ text: String) throws(DiscoveryRuleError) {
        if text.isEmpty { throw .serviceTypeEmpty }
        if text.count > 15 { throw .serviceTypeTooLong(text.count) }
        for c in text {
            let ok = c.isASCII && (("a"..."z").contains(c) || ("0"..."9").contains(c) || c == "-")
            if !ok { throw .serviceTypeInvalidCharacter(c) }
        }
        if !text.contains(where: { ("a"..."z").contains($0) }) { throw .serviceTypeNoLetter }
        if text.hasPrefix("-") || text.hasSuffix("-") { throw .serviceTypeHyphenAtEdge }
        if text.contains("--") { throw .serviceTypeAdjacentHyphens }
        name = text
    }

    /// `_<name>._tcp.local`.
    package var domain: DNSName { DNSName(labels: ["_" + name, "_tcp", "local"]) }

    package var description: String { "_\(name)._tcp" }
}

/// The user's key/value pairs published in the TXT record beside `id` and `v`.
/// Rules (as Multipeer Connectivity's discoveryInfo, RFC 6763 §6): keys non-empty and
/// without "=", each "key=value" at most 255 bytes (one TXT string), all pairs together
/// at most 400 bytes; "id" and "v" are reserved. RFC 6763 §6.4 recommends keys of at
/// most 9 characters (not enforced).
package struct DiscoveryInfo: Hashable, Sendable {
    package static let maxPairBytes = 255
    package static let maxTotalBytes = 400
    package static let reservedKeys: Set<String> = ["id", "v"]

    package let pairs: [String: String]

    package init(_ pairs: [String: String] = [:]) throws(DiscoveryRuleError) {
        var total = 0
        for key in pairs.keys.sorted() {
            let value = pairs[key]!
            if key.isEmpty { throw .infoKeyEmpty }
            if key.contains("=") { throw .infoKeyContainsEquals(key) }
            if Self.reservedKeys.contains(key.lowercased()) { throw .infoKeyReserved(key) }
            let bytes = key.utf8.count + 1 + value.utf8.count
            if bytes > Self.maxPairBytes { throw .infoPairTooLong(key: key, bytes: bytes) }
            total += bytes
        }
        if total > Self.maxTotalBytes { throw .infoTooLarge(bytes: total) }
        self.pairs = pairs
    }

    /// The TXT strings, sorted by key.
    var txtStrings: [[UInt8]] {
        pairs.keys.sorted().map { Array("\($0)=\(pairs[$0]!)".utf8) }
    }
}
