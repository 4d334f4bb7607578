internal import Glibc

/// Which interfaces discovery uses.
package enum InterfaceSelection: Hashable, Sendable {
    /// Every interface that is up, multicast-capable and not loopback, with an IPv4 or an
    /// IPv6 address.
    case automatic
    /// These interfaces (by name, e.g. "eth0" or "lo") when they are up and have an address.
    case named([String])
}

/// An interface in use: its name, index and addresses of each family. mDNS runs over IPv4
/// on it when it has an IPv4 address and over IPv6 when it has an IPv6 one.
struct MDNSInterface: Hashable, Sendable {
    var name: String
    var index: UInt32
    var addresses: [IPv4Address]
    /// Without zone (records carry none).
    var ipv6Addresses: [IPv6Address] = []

    func has(_ family: MDNSFamily) -> Bool {
        family == .v4 ? !addresses.isEmpty : !ipv6Addresses.isEmpty
    }
}

/// The two IP families mDNS runs over (RFC 6762 §20: 224.0.0.251 and ff02::fb).
enum MDNSFamily: Hashable, Sendable, CaseIterable {
    case v4
    case v6
}

/// Where a datagram came from (and where a unicast reply goes).
enum MDNSAddress: Hashable, Sendable {
    case v4(IPv4Address)
    /// With the interface index a link-local address is scoped to.
    case v6(IPv6Address, scope: UInt32)

    var family: MDNSFamily {
        if case .v4 = self { return .v4 }
        return .v6
    }
}

extension IPv4Address {
    init(_ addr: in_addr) {
        let v = addr.s_addr  // network order in memory
        self.init(UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24))
    }

    var inAddr: in_addr {
        in_addr(s_addr: UInt32(bytes.0) | UInt32(bytes.1) << 8 | UInt32(bytes.2) << 16 | UInt32(bytes.3) << 24)
    }
}

/// The interfaces of the calling thread's network namespace matching `selection`, with
/// their IPv4 and IPv6 addresses.
func currentInterfaces(_ selection: InterfaceSelection) -> [MDNSInterface] {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0, let first = list else { return [] }
    defer { freeifaddrs(list) }
    var byIndex: [UInt32: MDNSInterface] = [:]
    var cursor: UnsafeMutablePointer<ifaddrs>? = first
    while let entry = cursor {
        cursor = entry.pointee.ifa_next
        guard let sa = entry.pointee.ifa_addr, let cName = entry.pointee.ifa_name else { continue }
        let family = Int32(sa.pointee.sa_family)
        guard family == AF_INET || family == AF_INET6 else { continue }
        let name = String(cString: cName)
        let flags = Int(entry.pointee.ifa_flags)
        guard flags & IFF_UP != 0 else { continue }
        switch selection {
        case .automatic:
            guard flags & IFF_MULTICAST != 0, flags & IFF_LOOPBACK == 0 else { continue }
        case let .named(names):
            guard names.contains(name) else { continue }
        }
        let index = if_nametoindex(cName)
        guard index != 0 else { continue }
        var interface = byIndex[index] ?? MDNSInterface(name: name, index: index, addresses: [])
        if family == AF_INET {
            interface.addresses.append(sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { IPv4Address($0.pointee.sin_addr) })
        } else {
            interface.ipv6Addresses.append(sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { IPv6Address($0.pointee.sin6_addr) })
        }
        byIndex[index] = interface
    }
    return byIndex.values.map { interface in
        var sorted = interface
        sorted.addresses.sort()
        sorted.ipv6Addresses.sort()
        return sorted
    }.sorted { $0.index < $1.index }
}
