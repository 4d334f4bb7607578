import Foundation
import Glibc
import PeerNet
import Testing

/// A plain UDP socket on port 5353 that has joined the mDNS group on one interface, as
/// another responder on the machine (Avahi) has: it records the IP source address of
/// every datagram, as `recvfrom` reports it from the IP header. Create and read it on a
/// namespace thread.
final class SourceCapture: @unchecked Sendable {
    let fd: Int32
    let family: Int32

    init(family: Int32, interface: String) throws {
        self.family = family
        fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CommandFailed(description: "socket: \(errno)") }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, size)
        let index = if_nametoindex(interface)
        guard index != 0 else { throw CommandFailed(description: "no interface \(interface)") }
        func bindTo<Address>(_ address: inout Address) -> Int32 {
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
            }
        }
        let bound: Int32
        let joined: Int32
        if family == AF_INET6 {
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, size)
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(5353).bigEndian
            bound = bindTo(&address)
            var request = ipv6_mreq()
            inet_pton(AF_INET6, "ff02::fb", &request.ipv6mr_multiaddr)
            request.ipv6mr_interface = index
            joined = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_ADD_MEMBERSHIP, &request, socklen_t(MemoryLayout<ipv6_mreq>.size))
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(5353).bigEndian
            bound = bindTo(&address)
            var request = ip_mreqn()
            inet_pton(AF_INET, "224.0.0.251", &request.imr_multiaddr)
            request.imr_ifindex = Int32(index)
            joined = setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &request, socklen_t(MemoryLayout<ip_mreqn>.size))
        }
        guard joined == 0 else { throw CommandFailed(description: "joining the mDNS group on \(interface): \(errno)") }
        guard bound == 0 else { throw CommandFailed(description: "bind 5353: \(errno)") }
    }

    deinit { close(fd) }

    /// The source addresses (numeric text) of the datagrams received within `duration`
    /// that hold a DNS response or query naming `marker` (so only our nodes' packets count).
    func sources(for duration: Duration, containing marker: String) -> [String] {
        var result: [String] = []
        let deadline = ContinuousClock.now + duration
        let needle = Array(marker.utf8)
        while ContinuousClock.now < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 50) == 1 else { continue }
            var buffer = [UInt8](repeating: 0, count: 9000)
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let n = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &length) }
            }
            guard n > 0, contains(Array(buffer[..<n]), needle) else { continue }
            var text = [CChar](repeating: 0, count: 64)
            withUnsafeBytes(of: storage) { raw in
                if family == AF_INET6 {
                    var a = raw.load(as: sockaddr_in6.self).sin6_addr
                    inet_ntop(AF_INET6, &a, &text, 64)
                } else {
                    var a = raw.load(as: sockaddr_in.self).sin_addr
                    inet_ntop(AF_INET, &a, &text, 64)
                }
            }
            result.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return result
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        for start in 0...(haystack.count - needle.count) where Array(haystack[start..<start + needle.count]) == needle {
            return true
        }
        return false
    }
}

/// Issue 14.1: every mDNS packet leaves from the interface's own address, loopback
/// included. A receiver such as Avahi drops packets whose source is 0.0.0.0, which is
/// what the kernel chose on `lo` when only the interface index was given.
@Suite(.serialized, .enabled(if: Netns.available, Comment(rawValue: Netns.unavailableReason)))
struct PacketSourceTests {
    let type = try! ServiceType("srctest")

    /// Probes, announcements, queries and answers of an advertiser and a browser on `lo`
    /// all carry 127.0.0.1 as their source.
    @Test func loopbackPacketsLeaveFrom127001() async throws {
        let ns = try TestNamespace.loopbackOnly()
        defer { ns.remove() }
        let thread = try NetnsThread(ns)
        defer { thread.finish() }
        let capture = try thread.run { try SourceCapture(family: AF_INET, interface: "lo") }
        let nodes = NodeFactory(thread: thread, interfaces: .named(["lo"]))
        let advertiser = try nodes.advertiser(type, name: "Source Check", port: 40101, id: "SRC")
        let (browser, _) = try nodes.browser(type)
        defer { advertiser.stop(); browser.stop() }

        let sources = try thread.run { capture.sources(for: .milliseconds(2500), containing: "srctest") }
        print("IPv4 sources captured on lo: \(Set(sources).sorted()) (\(sources.count) packets)")
        #expect(sources.count >= 5, "too few packets captured: \(sources)")
        #expect(Set(sources) == ["127.0.0.1"], "\(sources)")
    }

    /// On a veth link the source is the link's address (it was already; kept so).
    @Test func vethPacketsLeaveFromTheLinkAddress() async throws {
        let (ns1, ns2, va, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        let t1 = try NetnsThread(ns1), t2 = try NetnsThread(ns2)
        defer { t1.finish(); t2.finish() }
        let capture = try t1.run { try SourceCapture(family: AF_INET, interface: va) }
        let advertiser = try NodeFactory(thread: t2, interfaces: .automatic)
            .advertiser(type, name: "Source Check", port: 40102, id: "SRC")
        defer { advertiser.stop() }

        let sources = try t1.run { capture.sources(for: .milliseconds(2500), containing: "srctest") }
        print("IPv4 sources captured over veth: \(Set(sources).sorted()) (\(sources.count) packets)")
        #expect(sources.count >= 3, "too few packets captured: \(sources)")
        #expect(Set(sources) == ["10.99.0.2"], "\(sources)")
    }
}
