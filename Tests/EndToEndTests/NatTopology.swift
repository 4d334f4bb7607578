import Foundation
import Glibc

/// Issue 39's world, in network namespaces of the test's own (removed by `remove()`):
///
///     home 1  192.168.1.2 ── 192.168.1.1  router 1  203.0.113.11 ─┐
///                                                                  ├─ br0 203.0.113.1  "internet"
///     home 2  192.168.1.2 ── 192.168.1.1  router 2  203.0.113.12 ─┘   (servers, a node with a
///                                                                      routable address)
///
/// Each router masquerades what its home sends out and lets nothing in that the home did not
/// start (nftables: input and forward drop, as home routers do: a dial from outside hangs until
/// its timeout rather than being refused). The homes use the same private subnet, as homes do,
/// and neither can reach the other; the internet has no route to either. `forwardPort` opens
/// one port of a router to its home (a port forward), the way a route to a home appears.
final class NatTopology {
    static let internetAddress = "203.0.113.1"
    static let homeAddress = "192.168.1.2"
    static let nftPath = "/usr/sbin/nft"

    /// Whether namespaces and nftables work here.
    static let available: Bool = TestNetns.available && FileManager.default.isExecutableFile(atPath: nftPath)

    let internet: String
    let routers: [String]
    let homes: [String]
    private var made: [String] = []

    /// The WAN address of router `index` (0 or 1): what the internet sees of its home.
    static func routerAddress(_ index: Int) -> String { "203.0.113.1\(index + 1)" }

    init() throws {
        internet = TestNetns.uniqueName()
        routers = [TestNetns.uniqueName(), TestNetns.uniqueName()]
        homes = [TestNetns.uniqueName(), TestNetns.uniqueName()]
        do {
            for name in [internet] + routers + homes {
                try TestNetns.ip(["netns", "add", name])
                made.append(name)
                try TestNetns.ip(["-n", name, "link", "set", "lo", "up"])
            }
            try run(internet, [
                ["link", "add", "br0", "type", "bridge"],
                ["addr", "add", "\(Self.internetAddress)/24", "dev", "br0"],
                ["link", "set", "br0", "up"],
            ])
            for index in 0..<2 {
                try connect(router: routers[index], home: homes[index], wan: Self.routerAddress(index), uplink: "up\(index)")
            }
        } catch {
            remove()
            throw error
        }
    }

    /// Interface names are per namespace: every veth is made in one namespace with its peer
    /// moved straight into the other, so none exists in the root namespace.
    private func connect(router: String, home: String, wan: String, uplink: String) throws {
        try TestNetns.ip(["-n", router, "link", "add", "wan", "type", "veth", "peer", "name", uplink, "netns", internet])
        try run(internet, [["link", "set", uplink, "master", "br0"], ["link", "set", uplink, "up"]])
        try TestNetns.ip(["-n", router, "link", "add", "lan", "type", "veth", "peer", "name", "eth0", "netns", home])
        try run(router, [
            ["addr", "add", "\(wan)/24", "dev", "wan"], ["link", "set", "wan", "up"],
            ["addr", "add", "192.168.1.1/24", "dev", "lan"], ["link", "set", "lan", "up"],
        ])
        try run(home, [
            ["addr", "add", "\(Self.homeAddress)/24", "dev", "eth0"], ["link", "set", "eth0", "up"],
            ["route", "add", "default", "via", "192.168.1.1"],
        ])
        try TestNetns.ip(["netns", "exec", router, "/usr/sbin/sysctl", "-qw", "net.ipv4.ip_forward=1"])
        try nft(router, """
            table ip nat {
                chain prerouting { type nat hook prerouting priority dstnat; }
                chain postrouting { type nat hook postrouting priority srcnat; oifname "wan" masquerade; }
            }
            table ip filter {
                chain input {
                    type filter hook input priority filter; policy drop;
                    iifname { "lo", "lan" } accept
                    ct state established,related accept
                }
                chain forward {
                    type filter hook forward priority filter; policy drop;
                    iifname "lan" oifname "wan" accept
                    ct state established,related accept
                    ct status dnat accept
                }
            }
            """)
    }

    /// A port forward on router `index`: TCP to its WAN address at `port` goes to its home's
    /// `port` from now on.
    func forwardPort(home index: Int, port: UInt16) throws {
        try nft(routers[index], """
            add rule ip nat prerouting iifname "wan" tcp dport \(port) dnat to \(Self.homeAddress):\(port)
            """)
    }

    /// Whether a TCP connection from `namespace` to `host`:`port` is accepted within 2 s.
    func connects(from namespace: String, to host: String, port: UInt16) -> Bool {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: TestNetns.ipPath)
        // KILL: the probe inherits the test's signal mask, where SIGTERM is blocked.
        probe.arguments = ["netns", "exec", namespace, "/usr/bin/timeout", "-s", "KILL", "2", "/bin/bash", "-c", "exec 3<>/dev/tcp/\(host)/\(port)"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }

    func remove() {
        for name in made.reversed() { _ = try? TestNetns.ip(["netns", "del", name]) }
        made = []
    }

    private func run(_ namespace: String, _ commands: [[String]]) throws {
        for command in commands { try TestNetns.ip(["-n", namespace] + command) }
    }

    /// Loads an nftables script into `namespace` (through a file: `ip netns exec` passes no stdin).
    private func nft(_ namespace: String, _ script: String) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-nft-\(UUID().uuidString.prefix(8)).nft")
        try (script + "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        try TestNetns.ip(["netns", "exec", namespace, Self.nftPath, "-f", file.path])
    }
}
