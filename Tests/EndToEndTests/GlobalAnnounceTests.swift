import Foundation
import TestKit
import Testing

/// What a daemon announces to a real `stdiscosrv` (in a test namespace, on a veth with a
/// global IPv6 address, a unique local one and a link-local one): the global IPv6 address
/// beside `tcp://:PORT`, never the other two (Syncthing's rule), and a relay it joins after
/// its first announcement at once, not at the server's next interval (30 minutes).
@Suite(.serialized, .enabled(if: GlobalServer.available && TestNetns.available, "needs syncthing-discosrv, syncthing-relaysrv and ip netns"))
struct GlobalAnnounceTests {
    /// The addresses the server gives for `certificateID`, asked from `namespace` (curl; the
    /// server's own certificate is pinned by nothing here: the answer is what is checked).
    func lookup(_ certificateID: String, at server: GlobalServer, from namespace: String) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestNetns.ipPath)
        process.arguments = ["netns", "exec", namespace, "/usr/bin/curl", "-sk", "--max-time", "5",
                             "https://10.99.0.1:\(server.port)/?device=\(certificateID)"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["addresses"] as? [String] ?? []
    }

    /// The certificate ID `daemon` is known by at discovery servers (`id --json`).
    static func certificateID(_ env: SyncpeerRunner, _ daemon: DaemonProcess) throws -> String {
        let id = try #require(try JSONSerialization.jsonObject(with: Data(env.cli(daemon, ["id", "--json"]).stdout.utf8)) as? [String: Any])
        return try #require(id["certificateID"] as? String)
    }

    @Test func globalIPv6AndARelayJoinedLaterAreAnnounced() throws {
        let (first, second, firstLink, _) = try TestNamespace.vethPair(ipv4: true, ipv6: true)
        defer { first.remove(); second.remove() }
        // fe80::1 (link-local) and fd99::1 (unique local) are there already; a global one too.
        try TestNetns.ip(["-n", first.name, "addr", "add", "2001:db8:99::1/64", "dev", firstLink, "nodad"])
        let server = try GlobalServer.discovery(namespace: first.name, host: "10.99.0.1")
        defer { server.stop() }
        // The relay's ID is made at its first start; it is then down until alice has announced.
        let relay = try GlobalServer.relay(namespace: first.name, host: "10.99.0.1")
        defer { relay.stop() }
        let relayURL = "relay://10.99.0.1:\(relay.port)/?id=\(relay.printedID)"
        relay.kill()
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice", arguments: ["--discovery-server", "https://10.99.0.1:\(server.port)/?id=\(server.printedID)",
                                                                      "--relay", relayURL],
                                      namespace: first.name, listen: "[::]:0")
        defer { _ = alice.stop() }
        let certificateID = try Self.certificateID(env, alice)

        var addresses: [String] = []
        try RelayTests().eventually("alice's first announcement") {
            addresses = try lookup(certificateID, at: server, from: second.name)
            return !addresses.isEmpty
        }
        #expect(addresses.contains("tcp://[2001:db8:99::1]:\(alice.port)"), "\(addresses)")
        #expect(!addresses.contains { $0.contains("fd99") || $0.contains("fe80") }, "\(addresses)")
        #expect(!addresses.contains { $0.hasPrefix("relay://") }, "\(addresses)")

        // The relay comes up: alice joins it (her next try) and announces it then.
        let back = try relay.restarted(namespace: first.name, host: "10.99.0.1")
        defer { back.stop() }
        try RelayTests().eventually("the relay announced once joined", timeout: 40) {
            addresses = try lookup(certificateID, at: server, from: second.name)
            return addresses.contains { $0.hasPrefix("relay://10.99.0.1:\(relay.port)/") }
        }
    }

    /// An address the host gains while the daemon runs is announced (the daemon hears of it
    /// from the kernel, not by polling the interfaces on its queue), without a restart.
    @Test func aGlobalIPv6AddressAddedLaterIsAnnounced() throws {
        let (first, second, firstLink, _) = try TestNamespace.vethPair(ipv4: true, ipv6: true)
        defer { first.remove(); second.remove() }
        try TestNetns.ip(["-n", first.name, "addr", "add", "2001:db8:99::1/64", "dev", firstLink, "nodad"])
        let server = try GlobalServer.discovery(namespace: first.name, host: "10.99.0.1")
        defer { server.stop() }
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice", arguments: ["--discovery-server", "https://10.99.0.1:\(server.port)/?id=\(server.printedID)"],
                                      namespace: first.name, listen: "[::]:0")
        defer { _ = alice.stop() }
        let certificateID = try Self.certificateID(env, alice)
        let (old, new) = ("tcp://[2001:db8:99::1]:\(alice.port)", "tcp://[2001:db8:99::7]:\(alice.port)")
        try RelayTests().eventually("alice's first announcement, without the address she has not yet") {
            let listed = try lookup(certificateID, at: server, from: second.name)
            return listed.contains(old) && !listed.contains(new)
        }
        try TestNetns.ip(["-n", first.name, "addr", "add", "2001:db8:99::7/64", "dev", firstLink, "nodad"])
        try RelayTests().eventually("the new address announced", timeout: 20) {
            try lookup(certificateID, at: server, from: second.name).contains(new)
        }
    }
}
