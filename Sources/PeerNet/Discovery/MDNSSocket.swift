internal import Glibc
internal import Synchronization

/// A datagram as received.
struct MDNSPacket: Sendable {
    var bytes: [UInt8]
    var source: MDNSAddress
    var sourcePort: UInt16
    /// The interface it arrived on (IP_PKTINFO / IPV6_PKTINFO).
    var interfaceIndex: UInt32
}

/// The mDNS groups and port (RFC 6762 §3, §20).
let mdnsGroup = IPv4Address(224, 0, 0, 251)
let mdnsGroup6 = IPv6Address("ff02::fb")!
let mdnsPort: UInt16 = 5353

/// The UDP sockets of one advertiser or browser, one per family: 0.0.0.0:5353 and
/// [::]:5353 (IPv6 only), with SO_REUSEADDR and SO_REUSEPORT (other responders on the
/// host share the port), members of 224.0.0.251 and ff02::fb on every chosen interface
/// that has an address of that family, hop limit 255, loopback on (other nodes on the
/// same host must hear us; our own packets come back and are recognised by content).
/// A kernel without IPv6 leaves only the IPv4 socket.
///
/// Why it is `Sendable`: the descriptors are immutable; the interface list and group
/// memberships are under a `Mutex`; the descriptors are closed only by `close()` after
/// the owner's thread has ended.
final class MDNSSocket: Sendable {
    let fd4: Int32
    /// nil when IPv6 is not available.
    let fd6: Int32?
    let selection: InterfaceSelection
    private let current = Mutex<[MDNSInterface]>([])
    /// Held while choosing the outgoing interface and sending, so that two threads never
    /// send out of each other's interface.
    private let sendLock = Mutex(())

    /// Every open descriptor (to poll).
    var descriptors: [Int32] { [fd4] + (fd6.map { [$0] } ?? []) }

    init(selection: InterfaceSelection, port: UInt16 = mdnsPort) throws(NetError) {
        fd4 = try Self.open(family: AF_INET, port: port)
        fd6 = try? Self.open(family: AF_INET6, port: port)
        self.selection = selection
        _ = refreshInterfaces()
    }

    private static func open(family: Int32, port: UInt16) throws(NetError) -> Int32 {
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw systemError("socket") }
        do throws(NetError) {
            try setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR")
            try setOption(fd, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT")
            // Hop limit 255 (RFC 6762 §11), loopback on, and the arrival interface of each datagram.
            let options: [(Int32, Int32, String)] = family == AF_INET6
                ? [(IPV6_V6ONLY, 1, "IPV6_V6ONLY"), (ipv6RecvPktinfo, 1, "IPV6_RECVPKTINFO"),
                   (IPV6_MULTICAST_HOPS, 255, "IPV6_MULTICAST_HOPS"), (IPV6_UNICAST_HOPS, 255, "IPV6_UNICAST_HOPS"),
                   (IPV6_MULTICAST_LOOP, 1, "IPV6_MULTICAST_LOOP")]
                : [(IP_PKTINFO, 1, "IP_PKTINFO"), (IP_MULTICAST_TTL, 255, "IP_MULTICAST_TTL"), (IP_TTL, 255, "IP_TTL"),
                   (IP_MULTICAST_LOOP, 1, "IP_MULTICAST_LOOP")]
            for (name, value, label) in options {
                try setOption(fd, family == AF_INET6 ? ipv6Level : ipv4Level, name, value, label)
            }
            let bound: Int32
            if family == AF_INET6 {
                var address = sockaddr_in6()
                address.sin6_family = sa_family_t(AF_INET6)
                address.sin6_port = port.bigEndian
                bound = bindTo(fd, &address)
            } else {
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = port.bigEndian
                bound = bindTo(fd, &address)
            }
            guard bound == 0 else { throw systemError(family == AF_INET6 ? "bind [::]:\(port)" : "bind 0.0.0.0:\(port)") }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
        return fd
    }

    /// The interfaces in use now.
    var interfaces: [MDNSInterface] { current.withLock { $0 } }

    /// Re-reads the interfaces (in the calling thread's namespace: call it from the thread
    /// that created the socket or one it started), joins the groups where an interface
    /// gained an address of the family and leaves them where it lost it. Returns whether
    /// anything (an interface or an address) changed.
    func refreshInterfaces() -> Bool {
        let fresh = currentInterfaces(selection)
        let old = current.withLock { $0 }
        guard fresh != old else { return false }
        for family in MDNSFamily.allCases {
            let before = Set(old.filter { $0.has(family) }.map(\.index))
            let after = Set(fresh.filter { $0.has(family) }.map(\.index))
            for index in after.subtracting(before) { membership(join: true, family, index) }
            for index in before.subtracting(after) { membership(join: false, family, index) }
        }
        current.withLock { $0 = fresh }
        return true
    }

    private func membership(join: Bool, _ family: MDNSFamily, _ index: UInt32) {
        switch family {
        case .v4:
            var request = ip_mreqn()
            request.imr_multiaddr = mdnsGroup.inAddr
            request.imr_address = in_addr(s_addr: 0)
            request.imr_ifindex = Int32(index)
            _ = setsockopt(fd4, ipv4Level, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
                           &request, socklen_t(MemoryLayout<ip_mreqn>.size))
        case .v6:
            guard let fd6 else { return }
            var request = ipv6_mreq()
            request.ipv6mr_multiaddr = mdnsGroup6.in6
            request.ipv6mr_interface = index
            _ = setsockopt(fd6, ipv6Level, join ? IPV6_ADD_MEMBERSHIP : IPV6_DROP_MEMBERSHIP,
                           &request, socklen_t(MemoryLayout<ipv6_mreq>.size))
        }
    }

    /// Multicasts `bytes` out of `interface` over `family`, or over each family the
    /// interface has an address of when nil. Errors (an interface that just went down)
    /// are ignored: mDNS is best effort.
    func multicast(_ bytes: [UInt8], on interface: MDNSInterface, family: MDNSFamily? = nil) {
        sendLock.withLock { _ in
            if family != .v6, let source = interface.addresses.first {
                // The interface's own address as the source: without it the kernel leaves the
                // source 0.0.0.0 where no address has link scope (loopback), and Avahi drops
                // such packets (RFC 6762 §11 receivers check the source is on the link).
                var request = ip_mreqn()
                request.imr_ifindex = Int32(interface.index)
                request.imr_address = source.inAddr
                _ = setsockopt(fd4, ipv4Level, IP_MULTICAST_IF, &request, socklen_t(MemoryLayout<ip_mreqn>.size))
                sendUnlocked(bytes, to: .v4(mdnsGroup), port: mdnsPort)
            }
            if family != .v4, fd6 != nil, interface.has(.v6) {
                // The kernel picks the interface's link-local (or ::1 on lo) as the source.
                var index = Int32(interface.index)
                _ = setsockopt(fd6!, ipv6Level, IPV6_MULTICAST_IF, &index, socklen_t(MemoryLayout<Int32>.size))
                sendUnlocked(bytes, to: .v6(mdnsGroup6, scope: interface.index), port: mdnsPort)
            }
        }
    }

    /// Sends `bytes` to one address (unicast replies).
    func send(_ bytes: [UInt8], to address: MDNSAddress, port: UInt16) {
        sendLock.withLock { _ in sendUnlocked(bytes, to: address, port: port) }
    }

    private func sendUnlocked(_ bytes: [UInt8], to address: MDNSAddress, port: UInt16) {
        switch address {
        case let .v4(ip):
            var target = sockaddr_in()
            target.sin_family = sa_family_t(AF_INET)
            target.sin_port = port.bigEndian
            target.sin_addr = ip.inAddr
            sendTo(fd4, bytes, &target)
        case let .v6(ip, scope):
            guard let fd6 else { return }
            var target = sockaddr_in6()
            target.sin6_family = sa_family_t(AF_INET6)
            target.sin6_port = port.bigEndian
            target.sin6_addr = ip.in6
            target.sin6_scope_id = scope
            sendTo(fd6, bytes, &target)
        }
    }

    private static func bindTo<Address>(_ fd: Int32, _ address: inout Address) -> Int32 {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
        }
    }

    private func sendTo<Address>(_ fd: Int32, _ bytes: [UInt8], _ target: inout Address) {
        _ = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL), $0, socklen_t(MemoryLayout<Address>.size))
                }
            }
        }
    }

    /// The next datagram waiting on `fd` (one of `descriptors`), or nil when none is
    /// waiting (the sockets are non-blocking).
    func receive(from fd: Int32) -> MDNSPacket? {
        var buffer = [UInt8](repeating: 0, count: 9_000)
        var control = [UInt8](repeating: 0, count: 256)
        var source = sockaddr_storage()
        var ctlLength = 0
        let received: Int = buffer.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { ctl in
                withUnsafeMutablePointer(to: &source) { src in
                    var iov = iovec(iov_base: data.baseAddress, iov_len: data.count)
                    return withUnsafeMutablePointer(to: &iov) { iovPointer in
                        var header = msghdr()
                        header.msg_name = UnsafeMutableRawPointer(src)
                        header.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
                        header.msg_iov = iovPointer
                        header.msg_iovlen = 1
                        header.msg_control = ctl.baseAddress
                        header.msg_controllen = ctl.count
                        let n = recvmsg(fd, &header, 0)
                        if n >= 0 { ctlLength = header.msg_controllen }
                        return n
                    }
                }
            }
        }
        guard received >= 0 else { return nil }
        var index: UInt32 = 0
        // Walk the control messages (struct cmsghdr: size_t len, int level, int type, data
        // aligned to size_t) for IP_PKTINFO (ifindex first) or IPV6_PKTINFO (ifindex after
        // the 16-byte address).
        let headerSize = MemoryLayout<cmsghdr>.size
        var offset = 0
        control.withUnsafeBytes { raw in
            while offset + headerSize <= ctlLength {
                let length = raw.loadUnaligned(fromByteOffset: offset, as: Int.self)
                let level = raw.loadUnaligned(fromByteOffset: offset + 8, as: Int32.self)
                let type = raw.loadUnaligned(fromByteOffset: offset + 12, as: Int32.self)
                guard length >= headerSize, offset + length <= ctlLength else { break }
                if level == ipv4Level, type == IP_PKTINFO, length >= headerSize + 4 {
                    index = UInt32(bitPattern: raw.loadUnaligned(fromByteOffset: offset + headerSize, as: Int32.self))
                } else if level == ipv6Level, type == ipv6Pktinfo, length >= headerSize + 20 {
                    index = raw.loadUnaligned(fromByteOffset: offset + headerSize + 16, as: UInt32.self)
                }
                offset += (length + 7) & ~7
            }
        }
        let address: MDNSAddress
        let port: UInt16
        switch Int32(source.ss_family) {
        case AF_INET6:
            let sin6 = withUnsafeBytes(of: source) { $0.loadUnaligned(as: sockaddr_in6.self) }
            address = .v6(IPv6Address(sin6.sin6_addr), scope: sin6.sin6_scope_id)
            port = UInt16(bigEndian: sin6.sin6_port)
        default:
            let sin = withUnsafeBytes(of: source) { $0.loadUnaligned(as: sockaddr_in.self) }
            address = .v4(IPv4Address(sin.sin_addr))
            port = UInt16(bigEndian: sin.sin_port)
        }
        return MDNSPacket(bytes: Array(buffer[0..<received]), source: address, sourcePort: port, interfaceIndex: index)
    }

    func close() {
        for fd in descriptors { _ = Glibc.close(fd) }
    }
}

private let ipv4Level = Int32(IPPROTO_IP)
private let ipv6Level = Int32(IPPROTO_IPV6)
/// <netinet/in.h> values (Linux), hidden behind _GNU_SOURCE in the Glibc module.
private let ipv6RecvPktinfo: Int32 = 49
private let ipv6Pktinfo: Int32 = 50
