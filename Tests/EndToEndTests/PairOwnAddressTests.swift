import Foundation
import PeerCrypto
import TestKit
import Testing

/// `syncpeer pair CERTIFICATE-ID` when the discovery server's answer lists this node's own
/// address (a hostile server, or a stale entry): the dial there completes a handshake with
/// ourselves. Before, that handshake won the race: bob invited himself (an invitation from
/// his own device, its code shown to the user) and the pairing waited for his own answer.
/// Now a handshake with our own key is closed and counts as a failed address.
@Suite(.serialized)
struct PairOwnAddressTests {
    @Test func aLookedUpAddressOfOurOwnIsNotThePeer() throws {
        let ca = try TestCA()
        defer { ca.remove() }
        let port = try GlobalServer.freePort()
        let answer = try JSONSerialization.data(withJSONObject: ["addresses": ["tcp://127.0.0.1:\(port)"]])
        let server = try TLSTestServer.pool(serving: Array(answer), ca: ca)
        defer { server.stop() }
        let serverID = CertificateID(certificate: server.certificate).description
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--discovery-server", "https://127.0.0.1:\(server.port)/?noannounce&id=\(serverID)"],
                                    listen: "127.0.0.1:\(port)")
        defer { _ = bob.stop() }
        // Another node's certificate ID (the server's: any but bob's own).
        let pairing = try PairingProcess(env, from: bob, to: bob, target: serverID)
        let deadline = Date().addingTimeInterval(30)
        while pairing.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.2) }
        if pairing.process.isRunning { pairing.process.terminate() }
        let result = try pairing.finish()
        let invitations = bob.events.filter { $0["event"] as? String == "invitation" }
        #expect(invitations.isEmpty, "bob invited himself: \(invitations)")
        #expect(result.status != 0 && result.stderr.contains("not found at the discovery servers"), "pair: \(result.status) \(result.stderr)")
        // Pairing by our own certificate ID is refused before anything is looked up.
        let own = try env.cli(bob, ["pair", try GlobalAnnounceTests.certificateID(env, bob)])
        #expect(own.status != 0 && own.stderr.contains("this node's own certificate ID"), "pair: \(own.status) \(own.stderr)")
    }
}
