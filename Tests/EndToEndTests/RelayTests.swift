import Foundation
import TestKit
import Testing

/// Two paired daemons that cannot dial each other (both came back on new ports, so the
/// addresses they stored lead nowhere, and discovery is off) meet through a real Syncthing
/// relay (`strelaysrv` on 127.0.0.1, `-pools=`: private) and sync as usual.
@Suite(.serialized, .enabled(if: GlobalServer.available, "needs syncthing-relaysrv (scripts/install-deps.sh)"))
struct RelayTests {
    func peer(_ env: SyncpeerRunner, _ daemon: DaemonProcess, named name: String) throws -> [String: Any]? {
        let result = try env.cli(daemon, ["peers", "--json"])
        return result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.first { ($0["peer"] as? [String: Any])?["name"] as? String == name }
    }

    func eventually(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !condition() {
            try #require(Date() < deadline, "timed out waiting: \(what)")
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    @Test func pairedPeersThatCannotDialEachOtherMeetThroughARelayAndSend() throws {
        let relay = try GlobalServer.relay()
        defer { relay.stop() }
        let url = "relay://127.0.0.1:\(relay.port)/?id=\(relay.printedID)"
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        var alice = try DaemonProcess(env, name: "alice", arguments: ["--auto-accept", "--relay", url])
        var bob = try DaemonProcess(env, name: "bob", arguments: ["--auto-accept", "--relay", url])
        _ = try env.pair(alice, bob, autoAccepted: true)
        try alice.waitForState("connected", peer: "bob")
        // Paired directly first: each learned the other's certificate ID in the session.
        try eventually("certificate IDs exchanged") {
            try peer(env, alice, named: "bob")?["certificateID"] != nil && peer(env, bob, named: "alice")?["certificateID"] != nil
        }
        let bobCertificate = try #require(try peer(env, alice, named: "bob")?["certificateID"] as? String)
        let bobID = try #require(try env.cli(bob, ["id", "--json"]).stdout.data(using: .utf8)
            .flatMap { try JSONSerialization.jsonObject(with: $0) as? [String: String] }?["certificateID"])
        #expect(bobCertificate == bobID)
        #expect(try peer(env, alice, named: "bob")?["path"] as? String == "direct \(bob.address)")
        #expect(try env.cli(alice, ["peers"]).stdout.contains("connected  paired  direct \(bob.address)"))

        // Both come back on new ports: neither can dial the other directly any more.
        _ = alice.stop()
        _ = bob.stop()
        alice = try DaemonProcess(env, name: "alice", home: alice.home, arguments: ["--auto-accept", "--relay", url])
        bob = try DaemonProcess(env, name: "bob", home: bob.home, arguments: ["--auto-accept", "--relay", url])
        defer { _ = alice.stop(); _ = bob.stop() }
        try alice.waitForState("connected", peer: "bob", timeout: 30)
        try eventually("alice's session with bob runs through the relay") {
            try peer(env, alice, named: "bob")?["path"] as? String == "relay 127.0.0.1"
        }

        // The keepalive measured the round trip through it, and the text list says both.
        try eventually("a round trip measured through the relay") {
            try (peer(env, alice, named: "bob")?["roundTripMs"] as? NSNumber).map { $0.doubleValue > 0 } ?? false
        }
        let listed = try env.cli(alice, ["peers"]).stdout
        #expect(listed.contains("bob (") && listed.range(of: #"connected  paired  relay 127\.0\.0\.1  rtt [0-9.]+ ms"#, options: .regularExpression) != nil,
                "\(listed)")

        let source = env.home("note.txt")
        let text = String(repeating: "through the relay\n", count: 5_000)
        try text.write(toFile: source, atomically: true, encoding: .utf8)
        let sent = try env.cli(alice, ["send", source, "--to", "bob"])
        #expect(sent.status == 0, "\(sent.stderr)")
        _ = try bob.waitFor("transfer", timeout: 30) { $0["name"] as? String == "note.txt" && $0["state"] as? String == "completed" }
        #expect(try String(contentsOfFile: bob.home + "/Downloads/note.txt", encoding: .utf8) == text)
    }
}

extension RelayTests {
    /// `pair CERTIFICATE-ID`: two nodes that never met, on no common network (discovery off,
    /// no address typed), pair through the relay by the ID `syncpeer id` prints.
    @Test func nodesThatNeverMetPairByCertificateIDThroughTheRelay() throws {
        let relay = try GlobalServer.relay()
        defer { relay.stop() }
        let url = "relay://127.0.0.1:\(relay.port)/?id=\(relay.printedID)"
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice", arguments: ["--auto-accept", "--relay", url])
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--auto-accept", "--relay", url])
        defer { _ = alice.stop(); _ = bob.stop() }
        let (aliceID, paired) = try env.pairByCertificateID(bob, with: alice)
        #expect(paired.status == 0, "\(paired.stderr)")
        try bob.waitForState("connected", peer: "alice", timeout: 20)
        try eventually("bob pinned alice's certificate ID") {
            try peer(env, bob, named: "alice")?["certificateID"] as? String == aliceID
        }
        #expect(try peer(env, bob, named: "alice")?["paired"] as? Bool == true)
        #expect(try peer(env, bob, named: "alice")?["path"] as? String == "relay 127.0.0.1")
    }
}
