import Foundation
import Glibc
import Testing

/// `send -` and `receive --stdout`: standard input to standard output between two daemons,
/// live (the first bytes arrive while the producer still writes), complete only when the
/// writer ended it, cut otherwise.
@Suite(.serialized) struct StreamTests {
    /// A running `syncpeer` CLI process with pipes on its standard streams.
    final class LiveCLI: @unchecked Sendable {
        // @unchecked: `collected` is guarded by `lock`.
        let process = Process()
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        private let lock = NSLock()
        private var collected = Data()
        private let done = DispatchSemaphore(value: 0)

        init(_ env: SyncpeerRunner, _ daemon: DaemonProcess, _ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
            process.arguments = ["--home", daemon.home] + arguments
            process.environment = ["PATH": "/usr/bin:/bin", "HOME": env.root.path, "SYNCPEER_INTERFACE": "lo"]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            let handle = output.fileHandleForReading
            Thread.detachNewThread { [self] in
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    lock.lock(); collected.append(data); lock.unlock()
                }
                done.signal()
            }
        }

        var stdout: Data { lock.lock(); defer { lock.unlock() }; return collected }

        func write(_ bytes: Data) { input.fileHandleForWriting.write(bytes) }
        func closeInput() { try? input.fileHandleForWriting.close() }

        /// Waits until standard output holds at least `count` bytes.
        func waitForOutput(_ count: Int, timeout: Double = 20) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if stdout.count >= count { return true }
                Thread.sleep(forTimeInterval: 0.05)
            }
            return false
        }

        /// Waits for the process to exit; returns its status and standard error.
        func finish(timeout: Double = 30) -> (status: Int32, stderr: String) {
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            _ = done.wait(timeout: .now() + 5)
            let stderr = String(decoding: errors.fileHandleForReading.availableDataNonBlocking(), as: UTF8.self)
            return (process.terminationStatus, stderr)
        }

        deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
    }

    static func pattern(_ count: Int, seed: UInt8) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed })
    }

    @Test func standardInputArrivesLiveOnTheReceiversStandardOutput() throws {
        let pair = try TransferPair(bobArguments: [])
        defer { pair.env.cleanup() }
        let receiver = try LiveCLI(pair.env, pair.bob, ["receive", "--stdout"])
        let sender = try LiveCLI(pair.env, pair.alice, ["send", "-", "--to", "bob", "--name", "notes.tar"])
        // The first 3 MiB (more than one window) reach bob's standard output while the
        // sender's standard input is still open: nothing waits for the end of the input.
        let first = Self.pattern(3 << 20, seed: 1)
        sender.write(first)
        #expect(receiver.waitForOutput(first.count), "only \(receiver.stdout.count) bytes arrived before the input ended")
        #expect(sender.process.isRunning)
        let rest = Self.pattern(5 << 20, seed: 2)
        sender.write(rest)
        sender.closeInput()
        let sent = sender.finish()
        #expect(sent.status == 0, "\(sent.stderr)")
        let received = receiver.finish()
        #expect(received.status == 0, "\(received.stderr)")
        #expect(receiver.stdout == first + rest)
        #expect(received.stderr.contains("Received stream notes.tar from alice: 8.0 MiB") || received.stderr.contains("Received stream notes.tar from alice"),
                "\(received.stderr)")
        // Nothing was spooled to a file on either side.
        let spool = (try? FileManager.default.contentsOfDirectory(atPath: pair.alice.home + "/spool")) ?? []
        #expect(spool.isEmpty, "\(spool)")
    }

    @Test func aStreamCutInTheMiddleIsReportedAsCut() throws {
        let pair = try TransferPair(bobArguments: [])
        defer { pair.env.cleanup() }
        let receiver = try LiveCLI(pair.env, pair.bob, ["receive", "--stdout", "--json"])
        let sender = try LiveCLI(pair.env, pair.alice, ["send", "-", "--to", "bob", "--name", "half"])
        let first = Self.pattern(1 << 20, seed: 3)
        sender.write(first)
        #expect(receiver.waitForOutput(first.count))
        // The sending node dies in the middle of the stream.
        pair.alice.crash()
        let received = receiver.finish()
        #expect(received.status != 0, "a cut stream ended with status 0: \(received.stderr)")
        #expect(received.stderr.contains("streamCut"), "\(received.stderr)")
        #expect(received.stderr.contains("cut"), "\(received.stderr)")
        #expect(receiver.stdout == first)
        sender.closeInput()
        _ = sender.finish()
    }

    @Test func aSenderThatStopsCutsTheStream() throws {
        let pair = try TransferPair(bobArguments: [])
        defer { pair.env.cleanup() }
        let receiver = try LiveCLI(pair.env, pair.bob, ["receive", "--stdout"])
        let sender = try LiveCLI(pair.env, pair.alice, ["send", "-", "--to", "bob", "--name", "interrupted"])
        sender.write(Self.pattern(100_000, seed: 4))
        #expect(receiver.waitForOutput(100_000))
        // Ctrl-C on the sender: its daemon stops the stream, and bob is told it is cut.
        kill(sender.process.processIdentifier, SIGINT)
        sender.process.waitUntilExit()
        // Its daemon notices when it next reads the input.
        sender.write(Self.pattern(1000, seed: 5))
        let received = receiver.finish()
        #expect(received.status != 0, "\(received.stderr)")
        #expect(received.stderr.contains("cut"), "\(received.stderr)")
        sender.closeInput()
        _ = sender.finish()
    }
}
