internal import Glibc

/// An IPv6 address (16 bytes, network order), as in AAAA records. A link-local address
/// (fe80::/10) means something only on one link, so one found on an interface carries
/// that interface's name as its zone: "fe80::1%eth0" is what dialling it needs.
package struct IPv6Address: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The 16 bytes.
    package let bytes: [UInt8]
    /// The interface name of a scoped (link-local) address; nil otherwise.
    package let zone: String?

    /// nil unless `bytes` has 16 bytes.
    package init?(bytes: [UInt8], zone: String? = nil) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
        self.zone = zone
    }

    /// Parses numeric text ("::1", "fd00::2", "fe80::1%eth0"); nil for anything else.
    package init?(_ text: String) {
        let parts = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
        guard let first = parts.first, !first.isEmpty else { return nil }
        var address = in6_addr()
        guard inet_pton(AF_INET6, String(first), &address) == 1 else { return nil }
        let zone = parts.count == 2 ? String(parts[1]) : nil
        if let zone, zone.isEmpty { return nil }
        self.init(bytes: withUnsafeBytes(of: address) { Array($0) }, zone: zone)
    }

    init(_ address: in6_addr, zone: String? = nil) {
        bytes = withUnsafeBytes(of: address) { Array($0) }
        self.zone = zone
    }

    var in6: in6_addr {
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
        return address
    }

    /// fe80::/10.
    package var isLinkLocal: Bool { bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 }

    /// The same address with `zone` (kept only for link-local addresses).
    package func scoped(to zone: String?) -> IPv6Address {
        IPv6Address(bytes: bytes, zone: isLinkLocal ? zone : nil)!
    }

    /// Numeric text (RFC 5952), with "%zone" when scoped.
    package var description: String {
        var address = in6
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return zone.map { "\(text)%\($0)" } ?? text
    }

    /// Routable addresses before link-local ones (the order in which to dial them), then
    /// by bytes and zone.
    package static func < (l: IPv6Address, r: IPv6Address) -> Bool {
        if l.isLinkLocal != r.isLinkLocal { return !l.isLinkLocal }
        if l.bytes != r.bytes { return l.bytes.lexicographicallyPrecedes(r.bytes) }
        return (l.zone ?? "") < (r.zone ?? "")
    }
}
