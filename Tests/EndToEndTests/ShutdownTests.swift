import Foundation
import Glibc
import Testing

/// Stopping a daemon: SIGTERM says goodbye to every peer and exits, whatever the peers do.
@Suite(.serialized)
struct ShutdownTests {
    /// A peer that reads nothing (a stalled route: the link forwards no byte, the sockets'
    /// buffers fill) while a transfer streams to it does not hold the daemon: it exits at
    /// once after its goodbye's grace, not after the send timeout (30 s). Found by `make
    /// chaos` (seed 1003: "alice did not exit within 15 s of SIGTERM").
    @Test func aPeerThatReadsNothingDoesNotHoldTheShutdown() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let inbox = env.home("inbox")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        // 20 MB/s: the transfer is still running when the route stalls.
        let alice = try DaemonProcess(env, name: "alice", environment: ["SYNCPEER_SEND_RATE": "20000000"], listen: "127.61.60.1:0")
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--auto-accept", "--receive-dir", inbox], listen: "127.61.60.2:0")
        let link = try ChaosLink(name: "alice-bob", index: 60, first: (alice.host, alice.port), second: (bob.host, bob.port))
        defer { link.stop() }
        _ = try env.pair(alice, bob, target: link.addressOfSecond, autoAccepted: true)
        try alice.waitForState("connected", peer: "bob")

        let source = env.home("outbox") + "/big.bin"
        try FileManager.default.createDirectory(atPath: env.home("outbox"), withIntermediateDirectories: true)
        try TestFiles.random(source, size: 200 << 20)
        let sent = try env.cli(alice, ["send", source, "--to", "bob", "--detach"])
        try #require(sent.status == 0, "\(sent.stderr)")
        _ = try bob.waitFor("transfer", timeout: 30) { ($0["bytes"] as? NSNumber)?.int64Value ?? 0 > 4 << 20 }
        link.state = .silent
        // Until alice's writes block: what the kernel buffers on the way is a few MB.
        Thread.sleep(forTimeInterval: 2)

        let stopping = ContinuousClock.now
        kill(alice.process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(15)
        while alice.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let exited = !alice.process.isRunning
        let took = ContinuousClock.now - stopping
        print("shutdown with a stalled peer: \(took) (\(exited ? "exited" : "still running"))")
        #expect(exited, "alice did not exit within 15 s of SIGTERM")
        if exited { #expect(alice.process.terminationStatus == 0) }
        alice.crash()
    }
}
