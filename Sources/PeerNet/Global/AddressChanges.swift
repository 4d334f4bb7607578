internal import Glibc

/// Whether this host's interface addresses changed, without asking for them: a netlink
/// socket subscribed to the kernel's address notices (IPv4 and IPv6 addresses added or
/// removed) in the calling thread's network namespace. `changed()` reads what came, never
/// blocking, so a caller re-reads the addresses (`GlobalIPv6.ofThisHost`, a getifaddrs
/// walk) only when they can differ. Any thread; one caller at a time.
package final class AddressChanges: Sendable {
    // linux/rtnetlink.h: RTMGRP_IPV4_IFADDR, RTMGRP_IPV6_IFADDR.
    private static let groups: UInt32 = 0x10 | 0x100
    private let fd: Int32

    /// Nil when the kernel gives no netlink socket (the caller then reads at intervals).
    package init?() {
        let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        // struct sockaddr_nl { sa_family_t nl_family; unsigned short nl_pad; __u32 nl_pid; __u32 nl_groups; }
        var address = [UInt8](repeating: 0, count: 12)
        address.withUnsafeMutableBytes { bytes in
            bytes.storeBytes(of: sa_family_t(AF_NETLINK), toByteOffset: 0, as: sa_family_t.self)
            bytes.storeBytes(of: Self.groups, toByteOffset: 8, as: UInt32.self)
        }
        let bound = address.withUnsafeBytes { bytes in
            bind(fd, bytes.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(bytes.count)) == 0
        }
        guard bound else {
            close(fd)
            return nil
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Whether an address was added or removed since the last call (true the first time a
    /// notice was lost to a full socket buffer: something changed). Reads what is queued.
    package func changed() -> Bool {
        var changed = false
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 { changed = true; continue }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == ENOBUFS { changed = true; continue }
            return changed
        }
    }
}
