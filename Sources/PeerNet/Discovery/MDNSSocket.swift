internal import Glibc
internal import Synchronization

/// Which interfaces discovery uses.
public enum InterfaceSelection: Hashable, Sendable {
    /// Every interface that is up, multicast-capable and not loopback, with an IPv4 address.
    case automatic
    /// These interfaces (by name, e.g. "eth0" or "lo") when they are up and have an IPv4 address.
    case named([String])
}

/// An interface in use: its name, index and IPv4 addresses.
struct MDNSInterface: Hashable, Sendable {
    var name: String
    var index: UInt32
    var addresses: [IPv4Address]
}

/// A datagram as received.
struct MDNSPacket: Sendable {
    var bytes: [UInt8]
    var source: IPv4Address
    var sourcePort: UInt16
    /// The interface it arrived on (IP_PKTINFO).
    var interfaceIndex: UInt32
}

/// The mDNS group and port (RFC 6762 §3).
let mdnsGroup = IPv4Address(224, 0, 0, 251)
let mdnsPort: UInt16 = 5353

extension IPv4Address {
    init(_ addr: in_addr) {
        let v = addr.s_addr  // network order in memory
        self.init(UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24))
    }

    var inAddr: in_addr {
        in_addr(s_addr: UInt32(bytes.0) | UInt32(bytes.1) << 8 | UInt32(bytes.2) << 16 | UInt32(bytes.3) << 24)
    }
}

/// The IPv4 interfaces of the calling thread's network namespace matching `selection`.
func currentInterfaces(_ selection: InterfaceSelection) -> [MDNSInterface] {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0, let first = list else { return [] }
    defer { freeifaddrs(list) }
    var byIndex: [UInt32: MDNSInterface] = [:]
    var cursor: UnsafeMutablePointer<ifaddrs>? = first
    while let entry = cursor {
        cursor = entry.pointee.ifa_next
        guard let sa = entry.pointee.ifa_addr, Int32(sa.pointee.sa_family) == AF_INET,
              let cName = entry.pointee.ifa_name else { continue }
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
        let address = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { IPv4Address($0.pointee.sin_addr) }
        byIndex[index, default: MDNSInterface(name: name, index: index, addresses: [])].addresses.append(address)
    }
    return byIndex.values.map { var i = $0; i.addresses.sort(); return i }.sorted { $0.index < $1.index }
}

/// The UDP socket of one advertiser or browser: bound to 0.0.0.0:5353 with SO_REUSEADDR
/// and SO_REUSEPORT (other responders on the host share the port), a member of
/// 224.0.0.251 on every chosen interface, multicast TTL 255, loopback on (other nodes on
/// the same host must hear us; our own packets come back and are recognised by content).
///
/// Why it is `Sendable`: `fd` is immutable; the interface list is under a `Mutex`;
/// the descriptor is closed only by `close()` after the owner's thread has ended.
final class MDNSSocket: Sendable {
    let fd: Int32
    let selection: InterfaceSelection
    private let current = Mutex<[MDNSInterface]>([])
    /// Held while choosing the outgoing interface and sending, so that two threads never
    /// send out of each other's interface.
    private let sendLock = Mutex(())

    init(selection: InterfaceSelection, port: UInt16 = mdnsPort) throws(NetError) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw systemError("socket") }
        self.fd = fd
        self.selection = selection
        do throws(NetError) {
            try setOption(SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR")
            try setOption(SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT")
            try setOption(IPPROTO_IP_, IP_PKTINFO, 1, "IP_PKTINFO")
            try setOption(IPPROTO_IP_, IP_MULTICAST_TTL, 255, "IP_MULTICAST_TTL")
            try setOption(IPPROTO_IP_, IP_TTL, 255, "IP_TTL")
            try setOption(IPPROTO_IP_, IP_MULTICAST_LOOP, 1, "IP_MULTICAST_LOOP")
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = in_addr(s_addr: 0)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw systemError("bind 0.0.0.0:\(port)") }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
        _ = refreshInterfaces()
    }

    private func setOption(_ level: Int32, _ name: Int32, _ value: Int32, _ what: String) throws(NetError) {
        var v = value
        guard setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw systemError("setsockopt \(what)")
        }
    }

    /// The interfaces in use now.
    var interfaces: [MDNSInterface] { current.withLock { $0 } }

    /// Re-reads the interfaces (in the calling thread's namespace: call it from the thread
    /// that created the socket or one it started), joins the group on new ones and leaves
    /// it on vanished ones. Returns whether anything (an interface or an address) changed.
    func refreshInterfaces() -> Bool {
        let fresh = currentInterfaces(selection)
        let old = current.withLock { $0 }
        guard fresh != old else { return false }
        let oldIndexes = Set(old.map(\.index)), newIndexes = Set(fresh.map(\.index))
        for index in newIndexes.subtracting(oldIndexes) { membership(IP_ADD_MEMBERSHIP, index) }
        for index in oldIndexes.subtracting(newIndexes) { membership(IP_DROP_MEMBERSHIP, index) }
        current.withLock { $0 = fresh }
        return true
    }

    private func membership(_ option: Int32, _ index: UInt32) {
        var request = ip_mreqn()
        request.imr_multiaddr = mdnsGroup.inAddr
        request.imr_address = in_addr(s_addr: 0)
        request.imr_ifindex = Int32(index)
        _ = setsockopt(fd, IPPROTO_IP_, option, &request, socklen_t(MemoryLayout<ip_mreqn>.size))
    }

    /// Multicasts `bytes` to 224.0.0.251:5353 out of `interface`. Errors (an interface
    /// that just went down) are ignored: mDNS is best effort.
    func multicast(_ bytes: [UInt8], on interface: MDNSInterface) {
        sendLock.withLock { _ in
            // The interface's own address as the source: without it the kernel leaves the
            // source 0.0.0.0 where no address has link scope (loopback), and Avahi drops
            // such packets (RFC 6762 §11 receivers check the source is on the link).
            var request = ip_mreqn()
            request.imr_ifindex = Int32(interface.index)
            request.imr_address = (interface.addresses.first ?? IPv4Address(0, 0, 0, 0)).inAddr
            _ = setsockopt(fd, IPPROTO_IP_, IP_MULTICAST_IF, &request, socklen_t(MemoryLayout<ip_mreqn>.size))
            sendUnlocked(bytes, to: mdnsGroup, port: mdnsPort)
        }
    }

    /// Sends `bytes` to one address (unicast replies).
    func send(_ bytes: [UInt8], to address: IPv4Address, port: UInt16) {
        sendLock.withLock { _ in sendUnlocked(bytes, to: address, port: port) }
    }

    private func sendUnlocked(_ bytes: [UInt8], to address: IPv4Address, port: UInt16) {
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = port.bigEndian
        target.sin_addr = address.inAddr
        _ = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL), $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    /// The next waiting datagram, or nil when none is waiting (the socket is non-blocking).
    func receive() -> MDNSPacket? {
        var buffer = [UInt8](repeating: 0, count: 9_000)
        var control = [UInt8](repeating: 0, count: 256)
        var source = sockaddr_in()
        var ctlLength = 0
        let received: Int = buffer.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { ctl in
                withUnsafeMutablePointer(to: &source) { src in
                    var iov = iovec(iov_base: data.baseAddress, iov_len: data.count)
                    return withUnsafeMutablePointer(to: &iov) { iovPointer in
                        var header = msghdr()
                        header.msg_name = UnsafeMutableRawPointer(src)
                        header.msg_namelen = socklen_t(MemoryLayout<sockaddr_in>.size)
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
        // aligned to size_t) for IP_PKTINFO.
        let headerSize = MemoryLayout<cmsghdr>.size
        var offset = 0
        control.withUnsafeBytes { raw in
            while offset + headerSize <= ctlLength {
                let length = raw.loadUnaligned(fromByteOffset: offset, as: Int.self)
                let level = raw.loadUnaligned(fromByteOffset: offset + 8, as: Int32.self)
                let type = raw.loadUnaligned(fromByteOffset: offset + 12, as: Int32.self)
                guard length >= headerSize, offset + length <= ctlLength else { break }
                if level == IPPROTO_IP_, type == IP_PKTINFO, length >= headerSize + 4 {
                    index = UInt32(bitPattern: raw.loadUnaligned(fromByteOffset: offset + headerSize, as: Int32.self))
                }
                offset += (length + 7) & ~7
            }
        }
        return MDNSPacket(bytes: Array(buffer[0..<received]), source: IPv4Address(source.sin_addr),
                          sourcePort: UInt16(bigEndian: source.sin_port), interfaceIndex: index)
    }

    func close() {
        _ = Glibc.close(fd)
    }
}

private let IPPROTO_IP_ = Int32(IPPROTO_IP)
