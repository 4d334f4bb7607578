import Foundation
import TestKit
import Testing

/// `daemon --relay-pool URL`: two nodes that know no relay but a pool's address (a local
/// HTTPS server, its certificate from a CA made here, trusted through SSL_CERT_FILE as the
/// system's bundle would be) join the relay it lists (a real strelaysrv, `-pools=`: private;
/// the pool's other relay answers nothing and is passed over) and pair through it.
@Suite(.serialized, .enabled(if: GlobalServer.available, "needs syncthing-relaysrv (scripts/install-deps.sh)"))
struct RelayPoolPairingTests {
    static func poolAnswer(_ urls: [String]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: ["relays": urls.map { ["url": $0] }]))
    }

    @Test func nodesPairThroughTheRelayALocalPoolLists() throws {
        let relay = try GlobalServer.relay()
        defer { relay.stop() }
        let ca = try TestCA()
        defer { ca.remove() }
        let pool = try TLSTestServer.pool(serving: try Self.poolAnswer([
            "relay://127.0.0.1:\(relay.port)/?id=\(relay.printedID)&pingInterval=1m0s&providedBy=test",
            "relay://127.0.0.1:\(try GlobalServer.freePort())/?id=\(relay.printedID)",
        ]), ca: ca)
        defer { pool.stop() }
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let arguments = ["--auto-accept", "--relay-pool", "https://127.0.0.1:\(pool.port)/endpoint"]
        let alice = try DaemonProcess(env, name: "alice", arguments: arguments, environment: ["SSL_CERT_FILE": ca.caFile.path])
        let bob = try DaemonProcess(env, name: "bob", arguments: arguments, environment: ["SSL_CERT_FILE": ca.caFile.path])
        defer { _ = alice.stop(); _ = bob.stop() }
        let (_, paired) = try env.pairByCertificateID(bob, with: alice)
        #expect(paired.status == 0, "\(paired.stderr)")
        try bob.waitForState("connected", peer: "alice", timeout: 20)
        #expect(try RelayTests().peer(env, bob, named: "alice")?["path"] as? String == "relay 127.0.0.1")
    }

    /// Without the test CA (the system's bundle only), the same pool is refused, and the
    /// daemon says why; it joins nothing.
    @Test func aPoolWhoseCertificateNoTrustedCAIssuedIsRefused() throws {
        let ca = try TestCA()
        defer { ca.remove() }
        let pool = try TLSTestServer.pool(serving: try Self.poolAnswer([]), ca: ca)
        defer { pool.stop() }
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice", arguments: ["--relay-pool", "https://127.0.0.1:\(pool.port)/endpoint"])
        defer { _ = alice.stop() }
        let error = try alice.waitFor("error", timeout: 20) { ($0["reason"] as? String ?? "").contains("relay pool") }
        let reason = error["reason"] as? String ?? ""
        #expect(reason.contains("the server's certificate was refused"), "\(reason)")
    }
}
