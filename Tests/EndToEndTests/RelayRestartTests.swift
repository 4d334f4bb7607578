import Foundation
import TestKit
import Testing

extension RelayTests {
    /// The relay a transfer runs through is killed midway and started again (same port, same
    /// keys): both daemons join it again, alice redials bob through it, and the transfer
    /// resumes where it was, the file whole with at most one send window sent twice.
    @Test func aTransferThroughARelayKilledAndRestartedResumes() throws {
        var relay = try GlobalServer.relay()
        defer { relay.stop() }
        let url = "relay://127.0.0.1:\(relay.port)/?id=\(relay.printedID)"
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let knobs = ["SYNCPEER_SEND_RATE": "4000000"]
        let (alice, bob, _) = try relayedPair(env, relay: url, environment: knobs)
        defer { _ = alice.stop(); _ = bob.stop() }

        let source = env.home("relayed.bin")
        try TestFiles.random(source, size: 24 << 20)
        let (process, out) = try env.startJSONSend(home: alice.home, source, to: "bob")
        try bob.waitForReceived(4 << 20)
        relay = try relay.killedAndRestarted(after: 1)
        try alice.waitFor("transfer", timeout: 20) { $0["state"] as? String == "paused" }

        // Bounded: a transfer that never resumes fails here rather than hanging the read below.
        try bob.waitFor("transfer", timeout: 60) { $0["name"] as? String == "relayed.bin" && $0["state"] as? String == "completed" }
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(stdout)")
        try TestFiles.expectSame(source, bob.home + "/Downloads/relayed.bin")
        let final = try #require(TransferPair.result(stdout))
        let resent = try #require((final["resent"] as? NSNumber)?.int64Value)
        print("relay killed and restarted mid-transfer: \(resent) bytes re-sent (bound \(ResumeTests.inFlightBound))")
        #expect(resent <= ResumeTests.inFlightBound)
        #expect(try peer(env, alice, named: "bob")?["path"] as? String == "relay 127.0.0.1")
    }
}
