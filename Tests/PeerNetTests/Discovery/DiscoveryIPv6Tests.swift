import Foundation
import Glibc
import PeerNet
import Testing

/// Issue 14.3: discovery over IPv6 (ff02::fb, AAAA records), in namespaces of our own
/// that have IPv6 only (link-local addresses, no IPv4 on the link) or both families.
@Suite(.serialized, .enabled(if: Netns.available, Comment(rawValue: Netns.unavailableReason)))
struct DiscoveryIPv6Tests {
    let type = try! ServiceType("syncpeer-six")

    /// Two namespaces whose link has only fe80::1 and fe80::2: each finds the other with
    /// its link-local address scoped to the link, the packets leave from those addresses,
    /// and a TCP connection to the found address (with its zone) reaches a listener on [::].
    /// (IPv6 multicast over `lo` is not delivered by Linux, so IPv6 is tested on veth links.)
    @Test func ipv6OnlyLinkLocal() async throws {
        let (ns1, ns2, va, vb) = try TestNamespace.vethPair(ipv4: false, ipv6: true)
        defer { ns1.remove(); ns2.remove() }
        let t1 = try NetnsThread(ns1), t2 = try NetnsThread(ns2)
        defer { t1.finish(); t2.finish() }
        let one = NodeFactory(thread: t1, interfaces: .automatic)
        let two = NodeFactory(thread: t2, interfaces: .automatic)
        let capture = try t1.run { try SourceCapture(family: AF_INET6, interface: va) }

        let start = ContinuousClock.now
        let adv1 = try one.advertiser(type, name: "Six One", port: 42101, id: "ONE")
        let adv2 = try two.advertiser(type, name: "Six Two", port: 42102, id: "TWO")
        let (b1, log1) = try one.browser(type, ignoring: "ONE")
        let (b2, log2) = try two.browser(type, ignoring: "TWO")
        defer { adv1.stop(); adv2.stop(); b1.stop(); b2.stop() }

        let sources = try t1.run { capture.sources(for: .milliseconds(1500), containing: "syncpeer-six") }
        let found2 = try #require(await log1.wait(timeout: .seconds(15)) { $0.isFound("Six Two") }, "\(log1.all)")
        let found1 = try #require(await log2.wait(timeout: .seconds(15)) { $0.isFound("Six One") }, "\(log2.all)")
        print("IPv6-only discovery over veth: \(found2.0 - start) and \(found1.0 - start)")
        let seenTwo = try #require(log1.found("Six Two"))
        let seenOne = try #require(log2.found("Six One"))
        print("IPv6-only: ns1 found \(seenTwo.ipv6Addresses), ns2 found \(seenOne.ipv6Addresses)")
        #expect(seenTwo.addresses.isEmpty && seenOne.addresses.isEmpty)
        #expect(seenTwo.ipv6Addresses == [IPv6Address("fe80::2%\(va)")!])
        #expect(seenOne.ipv6Addresses == [IPv6Address("fe80::1%\(vb)")!])
        #expect(seenTwo.port == 42102)
        // ns1's own packets come back to it (multicast loopback) beside ns2's.
        print("IPv6 sources captured over veth (ns1 side): \(Set(sources).sorted()) (\(sources.count) packets)")
        #expect(sources.contains("fe80::2"), "\(sources)")
        #expect(Set(sources).isSubset(of: ["fe80::1", "fe80::2"]), "\(sources)")

        // Dial what was found: the zone picks the link.
        let listener = try t2.run { try TCPListener(host: "::", port: 0) }
        defer { listener.close() }
        let target = seenTwo.ipv6Addresses[0].description
        let connection = try t1.run { try TCPConnection.connect(host: target, port: listener.port, timeout: .seconds(5)) }
        defer { connection.close() }
        let accepted = try t2.run { try listener.accept() }  // names the zone in ns2
        defer { accepted.close() }
        print("IPv6-only TCP: dialled [\(target)]:\(listener.port), accepted from \(accepted.remoteDescription)")
        #expect(accepted.remoteHost == "fe80::1%\(vb)")
    }

    /// Both families on the link: each node is found once (not once per family), with its
    /// IPv4 address and its IPv6 ones, and stays found.
    @Test func dualStackFindsEachNodeOnce() async throws {
        let (ns1, ns2, va, _) = try TestNamespace.vethPair(ipv4: true, ipv6: true)
        defer { ns1.remove(); ns2.remove() }
        let t1 = try NetnsThread(ns1), t2 = try NetnsThread(ns2)
        defer { t1.finish(); t2.finish() }
        let (browser, log) = try NodeFactory(thread: t1, interfaces: .automatic).browser(type)
        let advertiser = try NodeFactory(thread: t2, interfaces: .automatic)
            .advertiser(type, name: "Dual", port: 42103, id: "DUAL")
        defer { advertiser.stop(); browser.stop() }

        let found = try #require(await log.wait(timeout: .seconds(15)) { $0.isFound("Dual") }, "\(log.all)")
        _ = found
        try await Task.sleep(for: .seconds(3))
        let events = log.all.filter { event in
            switch event {
            case let .found(i), let .updated(i): return i.displayName == "Dual"
            case let .lost(name): return name.hasPrefix("Dual.")
            }
        }
        #expect(events.count == 1, "\(events)")
        #expect(browser.instances.count == 1)
        let dual = try #require(log.found("Dual"))
        print("dual stack: found once with \(dual.addresses) and \(dual.ipv6Addresses)")
        #expect(dual.addresses == [IPv4Address(10, 99, 0, 2)])
        #expect(dual.ipv6Addresses == [IPv6Address("fd99::2")!, IPv6Address("fe80::2%\(va)")!])
    }
}
