import Foundation
import Glibc
import Testing

/// The `wormhole` clients the interop tests run against: Debian's (0.12) and the current
/// PyPI release in a venv (`.build/wormhole-pypi`, made on first use).
enum WormholeClient: String, CaseIterable, Sendable, CustomStringConvertible {
    case debian
    case pypi

    var description: String { rawValue }

    static let venv = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/wormhole-pypi").path

    private static let pypiPath: Result<String, WormholeFixture.Failure> = {
        let wormhole = venv + "/bin/wormhole"
        if FileManager.default.isExecutableFile(atPath: wormhole) { return .success(wormhole) }
        for (tool, arguments) in [("/usr/bin/python3", ["-m", "venv", "--clear", venv]),
                                  (venv + "/bin/pip", ["install", "--quiet", "--disable-pip-version-check", "magic-wormhole"])] {
            guard let result = try? SyncpeerRunner.runProgram(tool, arguments), result.status == 0 else {
                return .failure(WormholeFixture.Failure(description: "cannot make the PyPI magic-wormhole venv at \(venv) (\(tool) failed)"))
            }
        }
        return .success(wormhole)
    }()

    func path() throws -> String {
        switch self {
        case .debian: return WormholeFixture.wormhole
        case .pypi: return try Self.pypiPath.get()
        }
    }
}

/// A local Magic Wormhole mailbox server and transit relay (Debian's
/// python3-magic-wormhole-mailbox-server and magic-wormhole-transit-relay under `twist3`) on
/// free ports of 127.0.0.1, and helpers to run the real `wormhole` client and `syncpeer`
/// against them. Never the public servers. With `namespace`, the servers and every client
/// run inside a network namespace made for the fixture (loopback only, removed by `stop()`);
/// without, on the root namespace's 127.0.0.1. The `wormhole` client runs with `--no-listen`
/// (no direct address: every transfer goes through the local relay) unless asked to listen.
final class WormholeFixture {
    static let twist = "/usr/bin/twist3"
    static let wormhole = "/usr/bin/wormhole"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: twist) && FileManager.default.isExecutableFile(atPath: wormhole) }
    static let missingReason = "the Magic Wormhole tools are missing: run scripts/install-deps.sh (magic-wormhole, python3-magic-wormhole-mailbox-server, magic-wormhole-transit-relay)"

    let runner: SyncpeerRunner
    /// The `wormhole` executable `wormhole(_:_:)` runs.
    let client: String
    let mailboxPort: UInt16
    let relayPort: UInt16
    /// The namespace everything runs in (nil: the root one).
    let namespace: TestNamespace?
    private var servers: [Process] = []

    var mailboxURL: String { "ws://127.0.0.1:\(mailboxPort)/v1" }
    var relay: String { "127.0.0.1:\(relayPort)" }
    var syncpeerServers: [String] { ["--mailbox", mailboxURL, "--transit-relay", relay] }
    var wormholeServers: [String] { ["--relay-url", mailboxURL, "--transit-helper", "tcp:127.0.0.1:\(relayPort)"] }

    init(client: WormholeClient = .debian, namespace: Bool = false) throws {
        self.client = try client.path()
        if namespace {
            guard TestNetns.available else { throw Failure(description: TestNetns.unavailableReason) }
            self.namespace = try TestNamespace.loopbackOnly()
        } else {
            self.namespace = nil
        }
        do { runner = try SyncpeerRunner() } catch { self.namespace?.remove(); throw error }
        mailboxPort = try ExamplesTests.freePort()
        relayPort = try ExamplesTests.freePort()
        let dir = runner.root.path
        servers.append(try start(Self.twist, ["--log-file=\(dir)/mailbox.log", "wormhole-mailbox", "--port=tcp:\(mailboxPort):interface=127.0.0.1",
                                              "--channel-db=\(dir)/mailbox.sqlite"], name: "mailbox"))
        servers.append(try start(Self.twist, ["--log-file=\(dir)/relay.log", "transitrelay", "--port=tcp:\(relayPort):interface=127.0.0.1"], name: "relay"))
        for port in [mailboxPort, relayPort] { try waitUntilListening(port) }
    }

    /// Stops the servers (by their process ids) and removes the temporary directory.
    func stop() {
        for process in servers where process.isRunning {
            // SIGKILL: twist3 started from the test process did not stop on SIGTERM.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        namespace?.remove()
        runner.cleanup()
    }

    /// `executable ARGS` as run here: through `ip netns exec NS` inside the namespace.
    func command(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        guard let namespace else { return (executable, arguments) }
        return (TestNetns.ipPath, ["netns", "exec", namespace.name, executable] + arguments)
    }

    /// `ip -n NS ARGS` in the fixture's namespace.
    func ip(_ arguments: [String]) throws {
        let namespace = try #require(namespace, "the fixture has no namespace")
        try TestNetns.ip(["-n", namespace.name] + arguments)
    }

    /// A program running in the background, its output going to files.
    final class Background {
        let process: Process
        let stdoutPath: String
        let stderrPath: String

        init(process: Process, stdoutPath: String, stderrPath: String) {
            self.process = process
            self.stdoutPath = stdoutPath
            self.stderrPath = stderrPath
        }

        var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
        var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

        /// The wormhole code the program printed ("... receive CODE"), waiting up to 30 s.
        func code() throws -> String {
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline {
                if let match = stderr.firstMatch(of: /receive (\d+-[a-z0-9-]+)/) { return String(match.1) }
                guard process.isRunning else { break }
                usleep(50_000)
            }
            throw Failure(description: "no code printed: \(stderr)")
        }

        /// Waits for the end (at most 120 s, then kills it) and returns the exit status.
        func wait() -> Int32 {
            let deadline = Date().addingTimeInterval(120)
            while process.isRunning && Date() < deadline { usleep(50_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    private var count = 0

    /// Starts `executable` in `directory` (default: the temporary root).
    func background(_ executable: String, _ arguments: [String], in directory: String? = nil) throws -> Background {
        count += 1
        let process = Process()
        let (launched, launchArguments) = command(executable, arguments)
        process.executableURL = URL(fileURLWithPath: launched)
        process.arguments = launchArguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory ?? runner.root.path)
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": runner.root.path, "SYNCPEER_INTERFACE": "lo", "LANG": "C.UTF-8"]
        let out = runner.root.appendingPathComponent("out-\(count)").path, err = runner.root.appendingPathComponent("err-\(count)").path
        FileManager.default.createFile(atPath: out, contents: nil)
        FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return Background(process: process, stdoutPath: out, stderrPath: err)
    }

    /// `syncpeer ARGS` in the background.
    func syncpeer(_ arguments: [String], in directory: String? = nil) throws -> Background {
        try background(SyncpeerRunner.binary, arguments, in: directory)
    }

    /// `wormhole [servers] VERB ARGS` in the background (`--no-listen`: relay only; `listen`:
    /// it listens and offers its interface addresses as direct hints).
    func wormhole(_ verb: String, _ arguments: [String], in directory: String? = nil, listen: Bool = false) throws -> Background {
        try background(client, wormholeServers + [verb] + (listen ? [] : ["--no-listen"]) + ["--hide-progress"] + arguments, in: directory)
    }

    func directory(_ name: String) throws -> String {
        let path = runner.root.appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func start(_ executable: String, _ arguments: [String], name: String) throws -> Process {
        let process = Process()
        let (launched, launchArguments) = command(executable, arguments)
        process.executableURL = URL(fileURLWithPath: launched)
        process.arguments = launchArguments
        process.currentDirectoryURL = runner.root
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Waits until something listens on 127.0.0.1:`port` where the fixture runs (30 s at
    /// most); else stops the fixture (unless `stopping` is false) and throws.
    func waitUntilListening(_ port: UInt16, stopping: Bool = true) throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if namespace != nil {
                // A probe inside the namespace: bash's /dev/tcp connects or fails.
                let (launched, arguments) = command("/bin/bash", ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(port)"])
                if let result = try? SyncpeerRunner.runProgram(launched, arguments), result.status == 0 { return }
            } else if Self.connects(port) {
                return
            }
            usleep(100_000)
        }
        if stopping { stop() }
        throw Failure(description: "the local wormhole server on port \(port) did not start")
    }

    /// One connect to the root namespace's 127.0.0.1:`port`.
    private static func connects(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        close(fd)
        return ok
    }
}
