import Foundation
import Testing

/// Two sessions with one peer during a transfer: each end keeps one and closes the other
/// ("duplicate connection"); the transfer goes on on the session kept, without a pause.
@Suite(.serialized)
struct DuplicateSessionTests {
    /// Alice sends to bob; halfway she dials bob again (a second session from the device
    /// that dialled the first: the newer is kept, so the one the transfer runs on closes).
    /// Neither end reports the transfer paused, and the file arrives whole.
    @Test func aDuplicateConnectionDuringATransferPausesNothing() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let inbox = env.home("inbox")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        let paced = ["SYNCPEER_SEND_RATE": "20000000"]
        let alice = try DaemonProcess(env, name: "alice", environment: paced)
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--receive-dir", inbox, "--auto-accept"])
        let paired = try env.run(["--home", alice.home, "pair", bob.address])
        #expect(paired.status == 0, "\(paired.stderr)")
        try bob.waitForState("connected", peer: "alice")

        let source = env.home("twice.bin")
        try TestFiles.random(source, size: 60 << 20)
        let (process, out) = try env.startJSONSend(home: alice.home, source, to: "bob")
        try bob.waitForReceived(10 << 20)
        _ = try env.run(["--home", alice.home, "pair", bob.address])
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(stdout)")
        try TestFiles.expectSame(source, inbox + "/twice.bin")

        // The premise: a session with the peer was closed as a duplicate while the file moved.
        let duplicate = { (daemon: DaemonProcess) in
            daemon.events("state").contains { ($0["reason"] as? String)?.contains("duplicate connection") == true }
        }
        #expect(duplicate(alice) && duplicate(bob), "no duplicate session was closed")
        for (name, daemon) in [("alice", alice), ("bob", bob)] {
            let paused = daemon.events("transfer").filter { $0["state"] as? String == "paused" }
            #expect(paused.isEmpty, "\(name) paused: \(paused)")
        }
        #expect(!stdout.contains("\"paused\""), "\(stdout)")
    }
}
