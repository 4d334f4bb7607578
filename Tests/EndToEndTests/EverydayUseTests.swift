import Foundation
import Glibc
import Testing

/// Issue 13, as a user meets it: Ctrl-C on `send`, `--detach`, and the progress line on a
/// terminal across a link cut (read from a pseudo-terminal, frame by frame).
@Suite(.serialized)
struct EverydayUseTests {
    /// Alice reaches bob only through a proxy the test can slow down and cut.
    struct ProxiedPair {
        let env: SyncpeerRunner
        let alice: DaemonProcess
        let bob: DaemonProcess
        let proxy: ByteFlipProxy
        let inbox: String

        init(autoAccept: Bool = true) throws {
            env = try SyncpeerRunner()
            inbox = env.home("inbox")
            try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
            // The default dead-peer timeout (7 s), not the tests' 2 s: a stalled link shows as
            // "stalled" (after 2 s without a byte) before the daemons give up on it.
            let timers = ["SYNCPEER_KEEPALIVE_MS": "1000", "SYNCPEER_DEAD_PEER_MS": "7000"]
            alice = try DaemonProcess(env, name: "alice", environment: timers)
            bob = try DaemonProcess(env, name: "bob", arguments: ["--receive-dir", inbox] + (autoAccept ? ["--auto-accept"] : []),
                                    environment: timers)
            proxy = try ByteFlipProxy(targetPort: bob.port)
            _ = try env.pair(alice, bob, target: proxy.address, autoAccepted: autoAccept)
            try alice.waitForState("connected", peer: "bob")
        }

        func cleanup() {
            proxy.stop()
            env.cleanup()
        }

        /// `syncpeer send` as a separate process (stdout and stderr kept).
        func startSend(_ arguments: [String]) throws -> (Process, Pipe, Pipe) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
            process.arguments = ["--home", alice.home, "send"] + arguments
            process.environment = ["PATH": "/usr/bin:/bin", "HOME": env.root.path, "SYNCPEER_INTERFACE": "lo"]
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            process.standardInput = FileHandle.nullDevice
            try process.run()
            return (process, out, err)
        }

        /// The partial files bob holds (in the staging folder of the inbox).
        var partials: [String] {
            (try? FileManager.default.contentsOfDirectory(atPath: inbox + "/.syncpeer-partial")) ?? []
        }
    }

    static func text(_ pipe: Pipe) -> String { String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }

    /// An offer bob has not answered yet: Ctrl-C withdraws it; bob can no longer accept it.
    @Test func ctrlCWithdrawsAWaitingOffer() throws {
        let pair = try ProxiedPair(autoAccept: false)
        defer { pair.cleanup() }
        let source = pair.env.home("wrong-person.txt")
        try TestFiles.random(source, size: 10_000)
        let (process, _, err) = try pair.startSend([source, "--to", "bob"])
        let offer = try pair.bob.waitFor("offer", timeout: 20)
        let id = try #require(offer["transfer"] as? String)
        kill(process.processIdentifier, SIGINT)
        let stderr = Self.text(err)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130, "\(stderr)")
        #expect(stderr.contains("Cancelled wrong-person.txt"), "\(stderr)")
        try pair.bob.waitFor("transfer", timeout: 10) { $0["transfer"] as? String == id && $0["state"] as? String == "cancelled" }
        let accept = try pair.env.cli(pair.bob, ["accept", String(id.prefix(8))])
        #expect(accept.status != 0, "a withdrawn offer cannot be accepted: \(accept.stdout)")
        #expect(!FileManager.default.fileExists(atPath: pair.inbox + "/wrong-person.txt"))
    }

    /// Ctrl-C halfway: the transfer is cancelled at both ends and bob's partial data is gone.
    @Test func ctrlCMidTransferRemovesTheReceiversPartial() throws {
        let pair = try ProxiedPair()
        defer { pair.cleanup() }
        pair.proxy.slowDown(microsecondsPerChunk: 20_000)
        let source = pair.env.home("big.bin")
        try TestFiles.random(source, size: 20_000_000)
        let (process, _, err) = try pair.startSend([source, "--to", "bob"])
        try pair.bob.waitFor("transfer", timeout: 60) { event in
            event["direction"] as? String == "receive" && ((event["bytes"] as? NSNumber)?.int64Value ?? 0) > 1_000_000
        }
        #expect(!pair.partials.isEmpty, "bob holds a partial file while receiving")
        kill(process.processIdentifier, SIGINT)
        let stderr = Self.text(err)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130, "\(stderr)")
        #expect(stderr.contains("withdrawn"), "\(stderr)")
        try pair.bob.waitFor("transfer", timeout: 10) { $0["direction"] as? String == "receive" && $0["state"] as? String == "cancelled" }
        // The partial is removed on bob's transfer queue, just after the event.
        let deadline = Date().addingTimeInterval(5)
        while !pair.partials.filter({ $0.hasSuffix(".part") }).isEmpty && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(pair.partials.filter { $0.hasSuffix(".part") }.isEmpty, "left at bob: \(pair.partials)")
        #expect(!FileManager.default.fileExists(atPath: pair.inbox + "/big.bin"))
        let listed = try pair.env.cli(pair.alice, ["transfers", "--json"])
        #expect(listed.stdout.contains("\"state\":\"cancelled\""), "\(listed.stdout)")
    }

    /// `--detach` returns at once, says how to cancel, and the daemon finishes the transfer.
    @Test func detachLeavesTheTransferToTheDaemon() throws {
        let pair = try ProxiedPair()
        defer { pair.cleanup() }
        let source = pair.env.home("later.bin")
        try TestFiles.random(source, size: 3_000_000)
        let result = try pair.env.cli(pair.alice, ["send", source, "--to", "bob", "--detach"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("syncpeer cancel "), "\(result.stdout)")
        try pair.bob.waitFor("transfer", timeout: 60) { $0["direction"] as? String == "receive" && $0["state"] as? String == "completed" }
        try TestFiles.expectSame(source, pair.inbox + "/later.bin")
        // Without a daemon there is nobody to hand it to.
        let lonely = try pair.env.run(["--home", pair.env.home("nobody"), "send", source, "--to", "bob", "--detach"])
        #expect(lonely.status == 3, "\(lonely.stderr)")
    }

    /// The progress line on a 60-column terminal while the link stalls, is cut and comes back:
    /// stalled within 2 s (the daemon says nothing then), reconnecting, resuming from what bob
    /// holds, done; no frame wider than the terminal, no rate above what the link carries,
    /// no ETA while paused.
    @Test func progressOnATerminalTellsTheTruthAcrossALinkCut() throws {
        let pair = try ProxiedPair()
        defer { pair.cleanup() }
        // About 3 MB/s at most through the proxy (64 KiB per 20 ms).
        pair.proxy.slowDown(microsecondsPerChunk: 20_000)
        let source = pair.env.home("video.mkv")
        try TestFiles.random(source, size: 24_000_000)
        let terminal = try PseudoTerminal(["--home", pair.alice.home, "send", source, "--to", "bob"],
                                          environment: ["PATH": "/usr/bin:/bin", "HOME": pair.env.root.path,
                                                        "SYNCPEER_INTERFACE": "lo", "TERM": "xterm"], columns: 60)
        try pair.bob.waitFor("transfer", timeout: 60) { event in
            event["direction"] as? String == "receive" && ((event["bytes"] as? NSNumber)?.int64Value ?? 0) > 6_000_000
        }
        Thread.sleep(forTimeInterval: 1)
        // The link stalls: nothing moves (keepalives neither), so the daemons give up on it.
        pair.proxy.slowDown(microsecondsPerChunk: 30_000_000)
        try pair.alice.waitForState("notConnected", peer: "bob", timeout: 30)
        Thread.sleep(forTimeInterval: 1)
        pair.proxy.cutConnections()
        pair.proxy.slowDown(microsecondsPerChunk: 20_000)
        let status = terminal.wait()
        let raw = terminal.raw
        let frames = PseudoTerminal.frames(raw)
        print("progress frames at 60 columns (\(frames.count)):\n" + Self.sample(frames).joined(separator: "\n"))
        #expect(status == 0, "\(frames.suffix(5))")
        // Every frame redrawn in place fits; the summary after them is an ordinary line.
        let drawn = frames.filter { !$0.hasPrefix("Sent ") }
        #expect(drawn.allSatisfy { $0.count < 60 }, "\(drawn.filter { $0.count >= 60 })")
        func index(_ word: String, after start: Int = 0) -> Int? {
            frames.indices.first { $0 >= start && frames[$0].contains(word) }
        }
        let stalled = try #require(index("stalled"), "no 'stalled' frame")
        let reconnecting = try #require(index("reconnecting", after: stalled), "no 'reconnecting' frame after the stall")
        let resuming = try #require(index("resuming", after: reconnecting), "no 'resuming' frame after reconnecting")
        let done = try #require(index("done", after: resuming), "no 'done' frame")
        #expect(frames[done].hasPrefix("video.mkv  100%"), "\(frames[done])")
        // Paused and resuming frames carry no ETA; the resume starts from what was held.
        for frame in frames[stalled..<resuming] { #expect(!frame.contains("ETA"), "\(frame)") }
        let before = Self.percent(frames[stalled]) ?? 0
        for frame in frames[resuming...] where Self.percent(frame) != nil {
            #expect(Self.percent(frame)! >= before, "went back from \(before)%: \(frame)")
        }
        #expect(before >= 20, "the cut came after a quarter: \(frames[stalled])")
        // No rate above what the link carries (about 3.3 MB/s; 10 MB/s leaves room).
        for frame in frames { if let rate = Self.rate(frame) { #expect(rate < 10_000_000, "\(frame)") } }
        // Colour on the terminal (TERM is set, NO_COLOR is not).
        #expect(raw.contains("\u{1b}[33mstalled"), "the status is coloured")
    }

    /// Piped, the same transfer prints plain lines: no escape sequence, no carriage return.
    @Test func pipedProgressIsPlainLines() throws {
        let pair = try ProxiedPair()
        defer { pair.cleanup() }
        let source = pair.env.home("small.bin")
        try TestFiles.random(source, size: 2_000_000)
        let result = try pair.env.cli(pair.alice, ["send", source, "--to", "bob"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stdout.contains("\u{1b}") && !result.stdout.contains("\r"), "\(result.stdout)")
        #expect(result.stdout.contains("Sent small.bin to bob"), "\(result.stdout)")
    }

    /// NO_COLOR on a terminal: the live line, no colour.
    @Test func noColourWithNoColor() throws {
        let pair = try ProxiedPair()
        defer { pair.cleanup() }
        pair.proxy.slowDown(microsecondsPerChunk: 20_000)
        let source = pair.env.home("plain.bin")
        try TestFiles.random(source, size: 4_000_000)
        let terminal = try PseudoTerminal(["--home", pair.alice.home, "send", source, "--to", "bob"],
                                          environment: ["PATH": "/usr/bin:/bin", "HOME": pair.env.root.path, "SYNCPEER_INTERFACE": "lo",
                                                        "TERM": "xterm", "NO_COLOR": "1"], columns: 80)
        #expect(terminal.wait() == 0)
        let raw = terminal.raw
        #expect(raw.contains("\r"), "redrawn in place")
        #expect(!raw.contains("\u{1b}[3"), "no colour with NO_COLOR")
        #expect(PseudoTerminal.frames(raw).contains { $0.contains("100%") && $0.contains("done") })
    }

    static func percent(_ frame: String) -> Int? {
        guard let range = frame.range(of: #"\b(\d{1,3})%"#, options: .regularExpression) else { return nil }
        return Int(frame[range].dropLast())
    }

    /// "3.2 MB/s" in a frame, in bytes per second.
    static func rate(_ frame: String) -> Double? {
        guard let range = frame.range(of: #"[0-9.]+ [kMGT]?B/s"#, options: .regularExpression) else { return nil }
        let parts = frame[range].split(separator: " ")
        guard let value = Double(parts[0]) else { return nil }
        let scale: [Character: Double] = ["k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12]
        return value * (parts[1].first.flatMap { scale[$0] } ?? 1)
    }

    /// A few frames around each change of status (the whole list is long).
    static func sample(_ frames: [String]) -> [String] {
        var out: [String] = []
        var lastStatus = ""
        for (i, frame) in frames.enumerated() {
            let status = ["stalled", "reconnecting", "resuming", "done", "ETA", "waiting"].first { frame.contains($0) } ?? ""
            if status != lastStatus || i == 0 || i == frames.count - 1 { out.append(frame) }
            lastStatus = status
        }
        return out
    }
}
