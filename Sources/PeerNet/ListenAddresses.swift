internal import Glibc

/// Where other machines can dial a node that listens at HOST:PORT. A concrete host is its own
/// answer; a wildcard ("", "0.0.0.0", "::") means every address of this network namespace's
/// interfaces that are up, each with the port: IPv4 first, then IPv6 (not for "0.0.0.0").
/// Loopback and IPv6 link-local addresses (useless to another machine; link-local needs a
/// zone) are left out unless there is nothing else.
package enum ListenAddresses {
    /// At most this many addresses are given.
    package static let limit = 8

    package static func isWildcard(_ host: String) -> Bool { host.isEmpty || host == "0.0.0.0" || host == "::" }

    /// "HOST:PORT" (IPv6 in brackets) for each address, at most `limit`.
    package static func dialable(host: String, port: UInt16) -> [String] {
        guard isWildcard(host) else { return [HostPort(host: host, port: port).description] }
        let found = interfaceAddresses(ipv6: host != "0.0.0.0")
        let useful = found.filter { !$0.local }
        return (useful.isEmpty ? found : useful).prefix(limit).map { HostPort(host: $0.host, port: port).description }
    }

    /// The numeric addresses of the interfaces that are up, IPv4 before IPv6, without duplicates;
    /// `local`: loopback or IPv6 link-local.
    static func interfaceAddresses(ipv6: Bool) -> [(host: String, local: Bool)] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var v4: [(host: String, local: Bool)] = [], v6: [(host: String, local: Bool)] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            cursor = entry.pointee.ifa_next
            guard let sa = entry.pointee.ifa_addr, Int(entry.pointee.ifa_flags) & IFF_UP != 0 else { continue }
            let loopback = Int(entry.pointee.ifa_flags) & IFF_LOOPBACK != 0
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            switch Int32(sa.pointee.sa_family) {
            case AF_INET:
                var address = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { continue }
                let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !v4.contains(where: { $0.host == host }) { v4.append((host, loopback || host.hasPrefix("127."))) }
            case AF_INET6 where ipv6:
                var address = sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { continue }
                let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                let linkLocal = host.lowercased().hasPrefix("fe80:")
                if !v6.contains(where: { $0.host == host }) { v6.append((host, loopback || linkLocal || host == "::1")) }
            default:
                continue
            }
        }
        return v4 + v6
    }
}
