import Foundation
import Glibc
import Testing

/// Issue 14.3 with real daemons: discovery, pairing and connections over IPv6, in
/// namespaces the test creates (IPv6 only, with link-local addresses alone; or dual stack).
@Suite(.serialized, .enabled(if: TestNetns.available, Comment(rawValue: TestNetns.unavailableReason)))
struct DiscoveryIPv6Tests {
    /// No IPv4 on the link, only fe80::1 and fe80::2: the daemons find each other at their
    /// link-local addresses with the zone, and `pair NAME` connects over that address.
    @Test func ipv6OnlyDaemonsFindAndPairOverLinkLocal() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (ns1, ns2, va, vb) = try TestNamespace.vethPair(ipv4: false, ipv6: true)
        defer { ns1.remove(); ns2.remove() }

        let alice = try DaemonProcess(env, name: "alice", in: ns1, listen: "[::]:0")
        let bob = try DaemonProcess(env, name: "bob", in: ns2, arguments: ["--auto-accept"], listen: "[::]:0")
        defer { alice.stop(); bob.stop() }
        let bobSeen = try alice.waitForFound("bob")
        let aliceSeen = try bob.waitForFound("alice")
        print("IPv6-only daemons: alice found bob at \(bobSeen["addresses"] ?? "?"), bob found alice at \(aliceSeen["addresses"] ?? "?")")
        #expect(bobSeen["addresses"] as? [String] == ["[fe80::2%\(va)]:\(bob.port)"])
        #expect(aliceSeen["addresses"] as? [String] == ["[fe80::1%\(vb)]:\(alice.port)"])

        let paired = try env.cli(alice, ["pair", "bob", "--json"])
        #expect(paired.status == 0, "\(paired.stderr)")
        try alice.waitForState("connected", peer: "bob")
        let invitation = try bob.waitFor("invitation")
        print("IPv6-only pairing: bob was invited from \(invitation["address"] ?? "?")")
        #expect((invitation["address"] as? String)?.hasPrefix("[fe80::1%\(vb)]:") == true, "\(invitation)")
        let listed = jsonLines(try env.cli(alice, ["peers", "--json"]).stdout)
        #expect((listed.first?["addresses"] as? [String])?.first == "[fe80::2%\(va)]:\(bob.port)", "\(listed)")
    }

    /// Both families on the link: each daemon is found once (not once per family), with
    /// its IPv4 address first, then its IPv6 ones; `browse` and `peers` list it once and
    /// name the instance the same way.
    @Test func dualStackDaemonIsFoundOnce() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (ns1, ns2, va, _) = try TestNamespace.vethPair(ipv4: true, ipv6: true)
        defer { ns1.remove(); ns2.remove() }

        let alice = try DaemonProcess(env, name: "alice", in: ns1, listen: "[::]:0")
        let bob = try DaemonProcess(env, name: "bob", in: ns2, listen: "[::]:0")
        defer { alice.stop(); bob.stop() }
        try alice.waitForFound("bob")
        try bob.waitForFound("alice")
        Thread.sleep(forTimeInterval: 3)  // several query rounds over both families
        #expect(alice.events("found").count == 1, "\(alice.events("found"))")
        #expect(alice.events("lost").isEmpty)
        let expected = ["10.99.0.2:\(bob.port)", "[fd99::2]:\(bob.port)", "[fe80::2%\(va)]:\(bob.port)"]
        #expect(alice.events("found").first?["addresses"] as? [String] == expected)

        let browse = jsonLines(try env.cli(alice, ["browse", "--json"]).stdout)
        #expect(browse.count == 1, "\(browse)")
        #expect(browse.first?["addresses"] as? [String] == expected)
        let peers = jsonLines(try env.cli(alice, ["peers", "--json"]).stdout)
        #expect(peers.count == 1, "\(peers)")
        print("dual stack: browse lists bob once at \(browse.first?["addresses"] ?? "?")")
        #expect(browse.first?["instance"] as? String == "bob")
        #expect(peers.first?["instance"] as? String == "bob")
    }
}

/// `--peer [ADDR]:PORT`: a static peer at an IPv6 address (loopback, no discovery).
@Suite(.serialized)
struct StaticIPv6PeerTests {
    @Test func staticIPv6PeerIsDialledAndStored() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice", listen: "[::1]:0")
        defer { alice.stop() }
        #expect(alice.address == "[::1]:\(alice.port)")
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--peer", alice.address], listen: "[::1]:0")
        defer { bob.stop() }
        let invitation = try alice.waitFor("invitation")
        #expect(peerName(invitation) == "bob")
        #expect((invitation["address"] as? String)?.hasPrefix("[::1]:") == true, "\(invitation)")
        #expect(try env.cli(alice, ["accept", try #require(invitation["invitation"] as? String)]).status == 0)
        try bob.waitForState("connected", peer: "alice")
        let listed = jsonLines(try env.cli(bob, ["peers", "--json"]).stdout)
        #expect((listed.first?["addresses"] as? [String])?.first == alice.address, "\(listed)")
    }
}
