import Foundation
import Glibc
import Testing

/// Issue 13 point 5: a send to a paired peer that is offline waits for it (and says so)
/// instead of failing, goes out when it is back, and `send --to A --to B` sends to several.
@Suite(.serialized)
struct OfflineSendTests {
    /// `send` as a background process whose standard output is read while it runs.
    final class RunningSend {
        let process = Process()
        let output = Pipe()
        let errors = Pipe()
        private let collected = CollectedOutput()

        init(_ env: SyncpeerRunner, _ daemon: DaemonProcess, _ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
            process.arguments = ["--home", daemon.home, "send"] + arguments
            process.environment = ["PATH": "/usr/bin:/bin", "HOME": env.root.path, "SYNCPEER_INTERFACE": "lo"]
            process.standardOutput = output
            process.standardError = errors
            process.standardInput = FileHandle.nullDevice
            let handle = output.fileHandleForReading
            let collected = self.collected
            handle.readabilityHandler = { collected.append($0.availableData) }
            try process.run()
        }

        var text: String { collected.text }

        /// Waits until the output so far satisfies `match` (false when the process ended first).
        func waitFor(timeout: Double = 30, _ match: (String) -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if match(text) { return true }
                if !process.isRunning { return match(text) }
                Thread.sleep(forTimeInterval: 0.05)
            }
            return match(text)
        }

        func finish() -> (status: Int32, stderr: String) {
            process.waitUntilExit()
            output.fileHandleForReading.readabilityHandler = nil
            collected.append(output.fileHandleForReading.readDataToEndOfFile())
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return (process.terminationStatus, stderr)
        }
    }

    /// bob is paired but stopped: `send` says at once that it waits for bob (it does not
    /// wait for a connection first, nor fail), and completes when bob starts again.
    @Test func aSendToAnOfflinePeerWaitsForItAndCompletesWhenItIsBack() throws {
        var pair = try TransferPair()
        defer { pair.env.cleanup() }
        #expect(pair.bob.stop() == 0)
        try pair.alice.waitForState("notConnected", peer: "bob")
        let source = pair.env.home("report.pdf")
        try TestFiles.random(source, size: 3_000_000)

        let send = try RunningSend(pair.env, pair.alice, [source, "--to", "bob", "--json"])
        defer { if send.process.isRunning { kill(send.process.processIdentifier, SIGKILL) } }
        // bob is started only once the command says it waits: this cannot be a late success.
        let waiting = send.waitFor { text in
            jsonLines(text).contains { ($0["state"] as? String) == "paused" && (($0["reason"] as? String) ?? "").hasPrefix("waiting for bob") }
        }
        #expect(waiting, "no 'waiting for bob' event: \(send.text)")
        #expect(send.process.isRunning, "send gave up: \(send.text)")
        let listed = jsonLines(try pair.env.cli(pair.alice, ["transfers", "--json"]).stdout)
        #expect(listed.count == 1 && listed.first?["state"] as? String == "paused", "\(listed)")
        #expect((listed.first?["reason"] as? String)?.contains("queued") == true, "\(listed)")

        pair.bob = try pair.restartBob()
        defer { pair.bob.stop() }
        let (status, stderr) = send.finish()
        #expect(status == 0, "\(stderr) \(send.text)")
        #expect(TransferPair.result(send.text)?["state"] as? String == "completed", "\(send.text)")
        try TestFiles.expectSame(source, pair.inbox + "/report.pdf")
    }

    /// `--detach` to an offline peer: the daemon keeps the offer (queued) and sends it when
    /// the peer comes back; the command returns at once and says it is queued.
    @Test func aDetachedSendIsQueuedByTheDaemonUntilThePeerIsBack() throws {
        var pair = try TransferPair()
        defer { pair.env.cleanup() }
        #expect(pair.bob.stop() == 0)
        try pair.alice.waitForState("notConnected", peer: "bob")
        let source = pair.env.home("later.bin")
        try TestFiles.random(source, size: 1_500_000)
        let handed = try pair.env.cli(pair.alice, ["send", source, "--to", "bob", "--detach"])
        #expect(handed.status == 0, "\(handed.stderr)")
        #expect(handed.stdout.contains("waiting for bob") && handed.stdout.contains("queued"), "\(handed.stdout)")
        let text = try pair.env.cli(pair.alice, ["transfers"]).stdout
        #expect(text.contains("paused") && text.contains("later.bin") && text.contains("waiting for bob"), "\(text)")

        pair.bob = try pair.restartBob()
        defer { pair.bob.stop() }
        try pair.alice.waitFor("transfer", timeout: 60) { $0["name"] as? String == "later.bin" && $0["state"] as? String == "completed" }
        try TestFiles.expectSame(source, pair.inbox + "/later.bin")
    }

    /// `send FILE --to bob --to carol`: both receive it, each gets a summary line; a peer
    /// that does not exist fails alone, named, and the others still get the file.
    @Test func oneSendToSeveralPeers() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let carolInbox = pair.env.home("carol-inbox")
        try FileManager.default.createDirectory(atPath: carolInbox, withIntermediateDirectories: true)
        let carol = try DaemonProcess(pair.env, name: "carol", arguments: ["--receive-dir", carolInbox, "--auto-accept"])
        defer { carol.stop() }
        _ = try pair.env.pair(pair.alice, carol, autoAccepted: true)
        try pair.alice.waitForState("connected", peer: "carol")
        let source = pair.env.home("slides.pdf")
        try TestFiles.random(source, size: 5_000_000)

        let both = try pair.env.cli(pair.alice, ["send", source, "--to", "bob", "--to", "carol"])
        #expect(both.status == 0, "\(both.stderr)")
        #expect(both.stdout.contains("Sent slides.pdf to bob") && both.stdout.contains("Sent slides.pdf to carol"), "\(both.stdout)")
        try TestFiles.expectSame(source, pair.inbox + "/slides.pdf")
        try TestFiles.expectSame(source, carolInbox + "/slides.pdf")

        let other = pair.env.home("notes.txt")
        try TestFiles.random(other, size: 10_000)
        let partly = try pair.env.cli(pair.alice, ["send", other, "--to", "nobody-here", "--to", "carol", "--json"])
        #expect(partly.status != 0, "\(partly.stdout)")
        #expect(partly.stderr.contains("nobody-here"), "\(partly.stderr)")
        #expect(jsonLines(partly.stdout).contains { $0["state"] as? String == "completed" && $0["name"] as? String == "notes.txt" }, "\(partly.stdout)")
        try TestFiles.expectSame(other, carolInbox + "/notes.txt")

        let stream = try pair.env.cli(pair.alice, ["send", "-", "--to", "bob", "--to", "carol", "--name", "x"], stdin: "abc")
        #expect(stream.status == 2 && stream.stderr.contains("one peer"), "\(stream.stderr)")
    }
}
