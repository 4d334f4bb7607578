internal import Glibc

/// The IPv6 addresses of this host that other networks can reach, which a node announces to
/// global discovery servers beside `tcp://:PORT` (that one the server fills in with the
/// address it sees, usually an IPv4 one behind NAT). The rule is Syncthing's: a global
/// unicast address (not unspecified, loopback, multicast or link-local fe80::/10), and not a
/// unique local one (fc00::/7, private like 10.0.0.0/8), nor an IPv4-mapped one.
package enum GlobalIPv6 {
    /// At most this many are announced (a host with more lists the first, in order).
    package static let maxAnnounced = 8

    package static func isGlobal(_ address: IPv6Address) -> Bool {
        let b = address.bytes
        let zero = b.allSatisfy { $0 == 0 }
        let loopback = b[0..<15].allSatisfy { $0 == 0 } && b[15] == 1
        let mapped = b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xFF && b[11] == 0xFF
        let multicast = b[0] == 0xFF
        let uniqueLocal = b[0] & 0xFE == 0xFC
        return !(zero || loopback || mapped || multicast || uniqueLocal || address.isLinkLocal)
    }

    /// The global IPv6 addresses of the interfaces that are up in this network namespace,
    /// sorted, without repeats.
    package static func ofThisHost() -> [IPv6Address] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var found = Set<IPv6Address>()
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            cursor = entry.pointee.ifa_next
            guard let sa = entry.pointee.ifa_addr, Int32(sa.pointee.sa_family) == AF_INET6,
                  Int(entry.pointee.ifa_flags) & IFF_UP != 0, Int(entry.pointee.ifa_flags) & IFF_LOOPBACK == 0 else { continue }
            let address = sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { IPv6Address($0.pointee.sin6_addr) }
            if isGlobal(address) { found.insert(address) }
        }
        return Array(found.sorted().prefix(maxAnnounced))
    }
}
