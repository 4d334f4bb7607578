import Foundation
import TestKit
import Testing

/// One NAT scenario test's world: the topology (`NatTopology`), the real `stdiscosrv` and
/// `strelaysrv` (`-pools=`: private) in its "internet", and daemons started in a home or in
/// the internet, every one announcing to the discovery server and joining the relay.
/// The relay listens on all its addresses (`0.0.0.0`, as relays are often run), the
/// discovery server on the internet's address (it drops loopback addresses).
final class NatWorld {
    let net: NatTopology
    let discovery: GlobalServer
    var relay: GlobalServer
    let env: SyncpeerRunner
    private var daemons: [DaemonProcess] = []

    /// Short lookups and direct tries, so that a test does not wait for the product's minutes.
    static let knobs = ["SYNCPEER_LOOKUP_MS": "500", "SYNCPEER_DIRECT_RETRY_MS": "1000"]

    init() throws {
        net = try NatTopology()
        do {
            discovery = try GlobalServer.discovery(namespace: net.internet, host: NatTopology.internetAddress)
        } catch {
            net.remove()
            throw error
        }
        do {
            relay = try GlobalServer.relay(namespace: net.internet, host: "0.0.0.0")
            env = try SyncpeerRunner()
        } catch {
            discovery.stop()
            net.remove()
            throw error
        }
    }

    var relayURL: String { "relay://\(NatTopology.internetAddress):\(relay.port)/?id=\(relay.printedID)" }
    var discoveryURL: String { "https://\(NatTopology.internetAddress):\(discovery.port)/?id=\(discovery.printedID)" }

    /// A daemon in home `home` (0 or 1; nil: in the internet, at a routable address), listening
    /// on all its addresses, auto-accepting, with the discovery server and (unless `joinsRelay`
    /// is false) the relay.
    /// `directory`: the daemon's home directory (a new one unless given: a restart).
    func daemon(_ name: String, home: Int?, directory: String? = nil, joinsRelay: Bool = true, environment: [String: String] = [:],
                arguments: [String] = []) throws -> DaemonProcess {
        let namespace = home.map { net.homes[$0] } ?? net.internet
        let global = ["--discovery-server", discoveryURL] + (joinsRelay ? ["--relay", relayURL] : [])
        let daemon = try DaemonProcess(env, name: name, home: directory, arguments: ["--auto-accept"] + global + arguments,
                                       environment: Self.knobs.merging(environment) { _, new in new },
                                       namespace: namespace, listen: "0.0.0.0:0")
        daemons.append(daemon)
        return daemon
    }

    /// alice (home 1) and bob (home 2), paired by bob with `pair ALICE-CERTIFICATE-ID` (looked
    /// up at the discovery server, then through the relay) and connected through the relay.
    func relayedHomes(environment: [String: String] = [:], arguments: [String] = []) throws -> (alice: DaemonProcess, bob: DaemonProcess) {
        let alice = try daemon("alice", home: 0, environment: environment, arguments: arguments)
        let bob = try daemon("bob", home: 1, environment: environment, arguments: arguments)
        let paired = try env.pairByCertificateID(bob, with: alice).result
        try #require(paired.status == 0, "pair by certificate ID: \(paired.stderr)")
        try bob.waitForState("connected", peer: "alice", timeout: 30)
        try eventually("alice and bob connected through the relay") {
            path(alice, "bob") == "relay \(NatTopology.internetAddress)" && path(bob, "alice") == "relay \(NatTopology.internetAddress)"
        }
        return (alice, bob)
    }

    /// What the discovery server answers to a lookup of `daemon` (its certificate ID), asked
    /// from the internet as any device would (lookups need no certificate).
    func announced(_ daemon: DaemonProcess) throws -> [String] {
        let id = try #require(try env.cli(daemon, ["id", "--json"]).stdout.data(using: .utf8)
            .flatMap { try JSONSerialization.jsonObject(with: $0) as? [String: String] }?["certificateID"])
        let script = """
            import json, ssl, sys, urllib.request
            try:
                answer = urllib.request.urlopen(sys.argv[1], context=ssl._create_unverified_context(), timeout=5)
                print("\\n".join(json.load(answer).get("addresses", [])))
            except Exception:
                pass
            """
        let url = "https://\(NatTopology.internetAddress):\(discovery.port)/?device=\(id)"
        let output = try TestNetns.ip(["netns", "exec", net.internet, "/usr/bin/python3", "-c", script, url])
        return output.split(separator: "\n").map(String.init)
    }

    /// How `daemon` reaches `peer`, as `peers --json` says ("direct ADDRESS", "relay HOST").
    func path(_ daemon: DaemonProcess, _ peer: String) -> String? {
        (try? RelayTests().peer(env, daemon, named: peer))?["path"] as? String
    }

    func eventually(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool) throws {
        try RelayTests().eventually(what, timeout: timeout, condition)
    }

    func stop() {
        for daemon in daemons { _ = daemon.stop() }
        relay.stop()
        discovery.stop()
        net.remove()
        env.cleanup()
    }
}
