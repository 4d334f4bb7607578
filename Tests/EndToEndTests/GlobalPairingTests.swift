import Foundation
import TestKit
import Testing

/// `syncpeer pair CERTIFICATE-ID` when the discovery server still lists an address the peer
/// left (a real `stdiscosrv` keeps an address until it expires): the addresses are dialled
/// at once, so the stale one, where nothing answers, does not hold the pairing up.
@Suite(.serialized, .enabled(if: GlobalServer.available && TestNetns.available, "needs syncthing-discosrv and ip netns"))
struct GlobalPairingTests {
    @Test func aStaleAddressListedFirstDoesNotDelayPairingByCertificateID() throws {
        let (first, second, firstLink, secondLink) = try TestNamespace.vethPair()
        defer { first.remove(); second.remove() }
        // Alice is first at 10.99.0.10, then at 10.99.0.1; the server keeps both. The old one
        // sorts first and swallows what is sent to it (a neighbour that never answers), so a
        // dial there waits for its connect timeout.
        try TestNetns.ip(["-n", first.name, "addr", "add", "10.99.0.10/24", "dev", firstLink])
        let server = try GlobalServer.discovery(namespace: first.name, host: "10.99.0.1")
        defer { server.stop() }
        let url = "https://10.99.0.1:\(server.port)/?id=\(server.printedID)"
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let arguments = ["--auto-accept", "--discovery-server", url]
        var alice = try DaemonProcess(env, name: "alice", arguments: arguments, namespace: first.name, listen: "10.99.0.10:0")
        defer { _ = alice.stop() }
        let certificateID = try GlobalAnnounceTests.certificateID(env, alice)
        let stalePort = alice.port
        let stale = "tcp://10.99.0.10:\(stalePort)"
        try RelayTests().eventually("alice announced \(stale)") {
            try GlobalAnnounceTests().lookup(certificateID, at: server, from: second.name).contains(stale)
        }
        _ = alice.stop()
        try TestNetns.ip(["-n", first.name, "addr", "del", "10.99.0.10/24", "dev", firstLink])
        try TestNetns.ip(["-n", second.name, "neigh", "replace", "10.99.0.10", "lladdr", "02:00:00:00:00:99", "dev", secondLink, "nud", "permanent"])
        alice = try DaemonProcess(env, name: "alice", home: alice.home, arguments: arguments, namespace: first.name, listen: "10.99.0.1:0")
        let live = "tcp://10.99.0.1:\(alice.port)"
        var listed: [String] = []
        try RelayTests().eventually("the server lists both addresses") {
            listed = try GlobalAnnounceTests().lookup(certificateID, at: server, from: second.name)
            return listed.contains(live) && listed.contains(stale)
        }
        try #require(listed.firstIndex(of: stale)! < listed.firstIndex(of: live)!, "the stale address must come first: \(listed)")

        let bob = try DaemonProcess(env, name: "bob", arguments: ["--discovery-server", url], namespace: second.name, listen: "10.99.0.2:0")
        defer { _ = bob.stop() }
        let paired = try env.pairByCertificateID(bob, with: alice).result
        #expect(paired.status == 0, "\(paired.stderr)")
        // The stale dial still ends (after its timeout), but only after the pairing went through.
        let deadDial = "cannot connect to 10.99.0.10:\(stalePort)"
        try bob.waitFor("error", timeout: 20) { ($0["reason"] as? String)?.contains(deadDial) == true }
        let events = bob.events
        let connected = try #require(events.firstIndex {
            $0["event"] as? String == "state" && $0["state"] as? String == "connected"
                && ($0["peer"] as? [String: Any])?["name"] as? String == "alice"
        })
        let failed = try #require(events.firstIndex { ($0["reason"] as? String)?.contains(deadDial) == true })
        #expect(connected < failed, "bob's events: \(events.map { "\($0["event"] ?? "?") \($0["state"] ?? $0["reason"] ?? "")" })")
    }
}
