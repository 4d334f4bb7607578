import Foundation
import TestKit
import Testing

extension RelayTests {
    /// Relay → direct: a paired pair that could only meet through the relay (both came back
    /// on new ports) is sending a file through it when a route appears at the address alice
    /// stored for bob (a forwarder to bob's new port). Alice's periodic direct try takes it,
    /// both ends keep the direct session and close the relayed one, and the transfer goes
    /// on without a pause and arrives whole.
    @Test func aRelayedPairMovesToDirectWhenARouteAppearsAndTheTransferGoesOn() throws {
        let relay = try GlobalServer.relay()
        defer { relay.stop() }
        let url = "relay://127.0.0.1:\(relay.port)/?id=\(relay.printedID)"
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let knobs = ["SYNCPEER_DIRECT_RETRY_MS": "500", "SYNCPEER_SEND_RATE": "4000000"]
        let (alice, bob, storedBobPort) = try relayedPair(env, relay: url, environment: knobs)
        defer { _ = alice.stop(); _ = bob.stop() }

        let source = env.home("moving.bin")
        try TestFiles.random(source, size: 24 << 20)
        let (process, out) = try env.startJSONSend(home: alice.home, source, to: "bob")
        try bob.waitForReceived(2 << 20)
        #expect(try peer(env, alice, named: "bob")?["path"] as? String == "relay 127.0.0.1", "moved before a route existed")

        // The route appears where alice last saw bob.
        let route = try ByteFlipProxy(targetPort: bob.port, port: storedBobPort)
        defer { route.stop() }
        try eventually("alice reaches bob directly") {
            try peer(env, alice, named: "bob")?["path"] as? String == "direct 127.0.0.1:\(storedBobPort)"
        }
        try eventually("bob's session with alice is direct too") {
            try (peer(env, bob, named: "alice")?["path"] as? String)?.hasPrefix("direct ") == true
        }

        // Bounded: a transfer that never resumes fails here rather than hanging the read below.
        try bob.waitFor("transfer", timeout: 60) { $0["name"] as? String == "moving.bin" && $0["state"] as? String == "completed" }
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(stdout)")
        try TestFiles.expectSame(source, bob.home + "/Downloads/moving.bin")
        for (name, daemon) in [("alice", alice), ("bob", bob)] {
            let paused = daemon.events("transfer").filter { $0["state"] as? String == "paused" }
            #expect(paused.isEmpty, "\(name) paused: \(paused)")
        }
    }
}
