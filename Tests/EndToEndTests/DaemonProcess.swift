import Foundation
import Glibc
import Testing

/// A real `syncpeer daemon` process in a temporary home, listening on 127.0.0.1:0. Its
/// NDJSON events (stdout, `--json`) are collected as they arrive so tests can wait for them.
///
/// Network safety: discovery (multicast DNS) is off (`--no-discovery`) unless the daemon
/// runs inside a network namespace the test made (`namespace:`, started with
/// `ip netns exec NS syncpeer …`); asking for discovery without one is a test error.
final class DaemonProcess: @unchecked Sendable {
    // @unchecked: `events` and `stdoutRest` are guarded by `lock`; the rest is set in init.
    let name: String
    let home: String
    /// The test network namespace it runs in (nil: the root one, without discovery).
    let namespace: String?
    let process = Process()
    private let log = EventLog()
    private(set) var port: UInt16 = 0
    /// The address it listens on (127.0.0.1 unless `listen:` said otherwise).
    private(set) var host = "127.0.0.1"
    let stderrPipe = Pipe()

    /// Test knobs: short keepalive and dead-peer delays so tests do not wait long.
    static let fastEnvironment = [
        "SYNCPEER_KEEPALIVE_MS": "300",
        "SYNCPEER_DEAD_PEER_MS": "2000",
        "SYNCPEER_REDIAL_MS": "300",
    ]

    /// Initialises the home (if needed) and starts the daemon; returns once it listens.
    init(_ env: SyncpeerRunner, name: String, home: String? = nil, arguments: [String] = [],
         environment: [String: String] = [:], namespace: String? = nil, discovery: Bool = false,
         listen: String = "127.0.0.1:0") throws {
        try #require(!discovery || namespace != nil, "discovery runs only inside a test network namespace")
        self.name = name
        self.namespace = namespace
        self.home = home ?? env.home(name)
        if !FileManager.default.fileExists(atPath: self.home + "/identity.key") {
            let result = try env.run(["--home", self.home, "init", "--name", name])
            try #require(result.status == 0, "init failed: \(result.stderr)")
        }
        // Every daemon receives into a folder of its own test home unless the test names one:
        // what it accepts never lands in a real or shared ~/Downloads.
        var receive: [String] = []
        if !arguments.contains("--receive-dir") {
            receive = ["--receive-dir", self.home + "/Downloads"]
            try FileManager.default.createDirectory(atPath: self.home + "/Downloads", withIntermediateDirectories: true)
        }
        let daemonArguments = ["--home", self.home, "daemon", "--listen", listen, "--json"]
            + (discovery ? [] : ["--no-discovery"]) + receive + arguments
        if let namespace {
            process.executableURL = URL(fileURLWithPath: TestNetns.ipPath)
            process.arguments = ["netns", "exec", namespace, SyncpeerRunner.binary] + daemonArguments
        } else {
            process.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
            process.arguments = daemonArguments
        }
        var environment = environment
        environment["PATH"] = "/usr/bin:/bin"
        if namespace == nil { environment["SYNCPEER_INTERFACE"] = "lo" }
        process.environment = Self.fastEnvironment.merging(environment) { _, new in new }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = stderrPipe
        process.standardInput = FileHandle.nullDevice
        log.collect(out.fileHandleForReading)
        try process.run()
        let listening = try waitFor("listening", timeout: 10)
        let address = try #require(listening["address"] as? String)
        let colon = try #require(address.lastIndex(of: ":"))
        port = try #require(UInt16(address[address.index(after: colon)...]))
        host = String(address[..<colon])  // "[v6]" keeps its brackets
    }

    var address: String { "\(host):\(port)" }
    var pid: Int32 { process.processIdentifier }

    /// All events so far.
    var events: [[String: Any]] { log.all }

    func events(_ kind: String) -> [[String: Any]] { events.filter { $0["event"] as? String == kind } }

    /// The device ID (dashed) of this daemon's home.
    func deviceID(_ env: SyncpeerRunner) throws -> String {
        let result = try env.cli(self, ["id", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        return try #require(object?["id"] as? String)
    }

    /// Waits until an event of `kind` matching `where` has arrived (among the events after
    /// the first `after`); returns it.
    @discardableResult
    func waitFor(_ kind: String, after skip: Int = 0, timeout: Double = 10,
                 where match: ([String: Any]) -> Bool = { _ in true }) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        func find() -> [String: Any]? {
            events.dropFirst(skip).first { $0["event"] as? String == kind && match($0) }
        }
        while Date() < deadline {
            if let found = find() { return found }
            if !process.isRunning { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
        if let found = find() { return found }
        let stderr = String(decoding: stderrPipe.fileHandleForReading.availableDataNonBlocking(), as: UTF8.self)
        throw DaemonError.timeout("\(name): no '\(kind)' event within \(timeout) s; events: \(events.map { $0["event"] ?? "?" }); stderr: \(stderr)")
    }

    /// Waits for a session state event from the peer named `peer` (after the first `after` events).
    @discardableResult
    func waitForState(_ state: String, peer: String, after skip: Int = 0, timeout: Double = 10) throws -> [String: Any] {
        try waitFor("state", after: skip, timeout: timeout) { event in
            (event["state"] as? String) == state && ((event["peer"] as? [String: Any])?["name"] as? String) == peer
        }
    }

    /// Waits until a transfer this daemon receives has `bytes` bytes (a transfer midway).
    func waitForReceived(_ bytes: Int64, timeout: Double = 30) throws {
        try waitFor("transfer", timeout: timeout) { event in
            guard event["direction"] as? String == "receive", let got = (event["bytes"] as? NSNumber)?.int64Value else { return false }
            return got >= bytes
        }
    }

    /// Sends SIGTERM and waits for a clean exit; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    /// SIGKILL, as a crash would.
    func crash() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { crash() }

    enum DaemonError: Error, CustomStringConvertible {
        case timeout(String)
        var description: String {
            switch self { case let .timeout(m): return m }
        }
    }
}

/// Events collected from a daemon's stdout.
final class EventLog: @unchecked Sendable {
    // @unchecked: `items` is only touched under `lock`.
    private let lock = NSLock()
    private var items: [[String: Any]] = []
    func append(_ item: [String: Any]) { lock.lock(); items.append(item); lock.unlock() }
    var all: [[String: Any]] { lock.lock(); defer { lock.unlock() }; return items }

    /// Appends each JSON object line read from `handle`, on a thread of its own, until the
    /// writer closes it.
    func collect(_ handle: FileHandle) {
        Thread { [self] in
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 0x0A) {
                    let line = buffer[buffer.startIndex..<newline]
                    buffer = Data(buffer[(newline + 1)...])
                    if let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any] { append(object) }
                }
            }
        }.start()
    }
}

extension FileHandle {
    /// What is readable now, without blocking (for error messages).
    func availableDataNonBlocking() -> Data {
        let fd = fileDescriptor
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            data.append(contentsOf: buffer[0..<n])
        }
        _ = fcntl(fd, F_SETFL, flags)
        return data
    }
}

extension SyncpeerRunner {
    /// Runs a CLI command against a daemon's home.
    @discardableResult
    func cli(_ daemon: DaemonProcess, _ arguments: [String], stdin: String? = nil) throws -> Result {
        try run(["--home", daemon.home] + arguments, stdin: stdin)
    }

    /// alice and bob, both accepting without asking, paired and connected.
    func autoAcceptingPair() throws -> (alice: DaemonProcess, bob: DaemonProcess) {
        let alice = try DaemonProcess(self, name: "alice", arguments: ["--auto-accept"])
        let bob = try DaemonProcess(self, name: "bob", arguments: ["--auto-accept"])
        _ = try pair(alice, bob, autoAccepted: true)
        try alice.waitForState("connected", peer: "bob")
        return (alice, bob)
    }

    /// Pairs `a` with `b` (a invites, b accepts); returns the SAS both showed.
    /// `target` is what `pair` dials (default: b's address).
    func pair(_ a: DaemonProcess, _ b: DaemonProcess, target: String? = nil, context: String? = nil,
              autoAccepted: Bool = false) throws -> String {
        let pairing = try PairingProcess(self, from: a, to: b, target: target, context: context)
        let invitation = try b.waitFor("invitation")
        let id = try #require(invitation["invitation"] as? String)
        if !autoAccepted {
            let accepted = try cli(b, ["accept", id])
            try #require(accepted.status == 0, "accept failed: \(accepted.stderr)")
        }
        let result = try pairing.finish()
        try #require(result.status == 0, "pair failed: \(result.stderr)")
        return try #require(invitation["code"] as? String)
    }
}

/// `syncpeer pair` running in the background while the other side answers.
final class PairingProcess {
    let process = Process()
    let out = Pipe(), err = Pipe()

    /// `target` is what is typed after `pair` (default: b's loopback address).
    init(_ env: SyncpeerRunner, from a: DaemonProcess, to b: DaemonProcess, target: String? = nil,
         context: String? = nil, json: Bool = true) throws {
        process.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
        var arguments = ["--home", a.home, "pair", target ?? b.address]
        if let context { arguments += ["--context", context] }
        if json { arguments.append("--json") }
        process.arguments = arguments
        process.environment = ["PATH": "/usr/bin:/bin", "SYNCPEER_INTERFACE": "lo"]
        process.standardOutput = out
        process.standardError = err
        try process.run()
    }

    func finish() throws -> SyncpeerRunner.Result {
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return .init(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                     stderr: String(decoding: stderr, as: UTF8.self))
    }
}
