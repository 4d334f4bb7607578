import Foundation
import Testing

/// Issue 45, point 5: with `--to` repeated, each live line names its peer; the summaries of
/// `send` and `receive` say how long it took and at what rate (as README shows).
@Suite struct ProgressLinesTests {
    @Test func linesForSeveralPeersNameThemAndSummariesHaveTimeAndRate() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice", arguments: ["--auto-accept"])
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--auto-accept"])
        let carol = try DaemonProcess(env, name: "carol")
        defer { _ = alice.stop(); _ = bob.stop(); _ = carol.stop() }
        _ = try env.pair(alice, bob, autoAccepted: true)
        _ = try env.pair(alice, carol)
        try alice.waitForState("connected", peer: "carol")
        let inbox = env.home("carol-inbox")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        // carol receives with `receive --accept` (piped), bob's daemon accepts by itself.
        let receive = Process()
        receive.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
        receive.arguments = ["--home", carol.home, "receive", "--accept", "--dir", inbox]
        receive.environment = ["PATH": "/usr/bin:/bin", "SYNCPEER_INTERFACE": "lo"]
        let received = Pipe()
        receive.standardOutput = received
        receive.standardError = received
        try receive.run()
        Thread.sleep(forTimeInterval: 0.5)   // waiting for the offer

        let source = env.home("video.bin")
        try TestFiles.random(source, size: 8_000_000)
        let terminal = try PseudoTerminal(["--home", alice.home, "send", source, "--to", "bob", "--to", "carol"],
                                          environment: ["PATH": "/usr/bin:/bin", "HOME": env.root.path, "SYNCPEER_INTERFACE": "lo",
                                                        "TERM": "xterm", "NO_COLOR": "1"], columns: 100)
        #expect(terminal.wait() == 0)
        let frames = PseudoTerminal.frames(terminal.raw)
        #expect(frames.contains { $0.hasPrefix("video.bin to bob ") }, "\(frames)")
        #expect(frames.contains { $0.hasPrefix("video.bin to carol ") }, "\(frames)")
        for peer in ["bob", "carol"] {
            let summary = frames.first { $0.hasPrefix("Sent video.bin to \(peer)") } ?? ""
            #expect(summary.range(of: #"re-sent in \d+\.\d s \([0-9.]+ [kMG]?B/s\)$"#, options: .regularExpression) != nil, "\(frames)")
        }
        receive.waitUntilExit()
        let text = String(decoding: received.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(receive.terminationStatus == 0, "\(text)")
        #expect(text.range(of: #"Received video.bin from alice \([A-Z0-9]+\): 8\.0 MB, .* in \d+\.\d s \([0-9.]+ [kMG]?B/s\) → "#,
                           options: .regularExpression) != nil, "\(text)")
    }

    /// `send -` on a terminal shows its line while the producer still writes (a stream's size
    /// is known only at its end: bytes, no percentage), not only the summary at the end.
    @Test func aStreamShowsItsProgressAtOnce() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, bob) = try env.autoAcceptingPair()
        defer { _ = alice.stop(); _ = bob.stop() }
        let input = Pipe()
        let terminal = try PseudoTerminal(["--home", alice.home, "send", "-", "--to", "bob", "--name", "notes.tar"],
                                          environment: ["PATH": "/usr/bin:/bin", "HOME": env.root.path, "SYNCPEER_INTERFACE": "lo",
                                                        "TERM": "xterm", "NO_COLOR": "1"], columns: 80, input: input.fileHandleForReading)
        let chunk = Data(repeating: 0x61, count: 1_000_000)
        try input.fileHandleForWriting.write(contentsOf: chunk)
        // The producer is still running: the line is there already, with what went out.
        try FolderSyncTests.eventually("a progress line while the stream is open", timeout: 10) {
            PseudoTerminal.frames(terminal.raw).contains { $0.hasPrefix("notes.tar  1.0 MB") }
        }
        #expect(!terminal.raw.contains("Sent stream"))
        try input.fileHandleForWriting.write(contentsOf: chunk)
        try input.fileHandleForWriting.close()
        #expect(terminal.wait() == 0)
        let frames = PseudoTerminal.frames(terminal.raw)
        #expect(frames.contains { $0.hasPrefix("Sent stream notes.tar to bob") && $0.contains("2.0 MB in ") }, "\(frames)")
        #expect(!frames.contains { $0.contains("%") }, "no percentage for a stream: \(frames)")
    }
}
