import Foundation
import PeerNet
import Synchronization
import Testing

/// python-zeroconf as an independent peer, in its own namespace: Debian's package
/// (python3-zeroconf 0.47.3 on bookworm) and the current PyPI release, in a venv this
/// test makes once (under .build, reused by later runs).
enum Zeroconf: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case debian
    case pypi

    static let helper = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Interop/zeroconf_peer.py").path
    static let systemPython = "/usr/bin/python3"
    static let venv = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".build/zeroconf-pypi").path

    static let available: Bool = (try? runCommand(systemPython, ["-c", "import zeroconf"])) != nil
    static let unavailableReason = "python3-zeroconf (and python3-venv) are not installed for /usr/bin/python3 (scripts/install-deps.sh installs them)"

    /// The venv with the current PyPI release, made on first use; the error says why not.
    private static let pypiPython: Result<String, CommandFailed> = {
        let python = venv + "/bin/python3"
        if (try? runCommand(python, ["-c", "import zeroconf"])) != nil { return .success(python) }
        do {
            try runCommand(systemPython, ["-m", "venv", "--clear", venv])
            try runCommand(venv + "/bin/pip", ["install", "--quiet", "--disable-pip-version-check", "zeroconf"])
            return .success(python)
        } catch {
            return .failure(CommandFailed(description: "cannot make the PyPI zeroconf venv at \(venv): \(error)"))
        }
    }()

    /// The interpreter that has this zeroconf.
    func python() throws -> String {
        switch self {
        case .debian: return Self.systemPython
        case .pypi: return try Self.pypiPython.get()
        }
    }

    var testDescription: String { self == .debian ? "Debian python3-zeroconf" : "PyPI zeroconf" }
}

/// Text collected from a child's pipe, split into lines.
final class LineCollector: Sendable {
    private let state = Mutex<(partial: String, lines: [String])>(("", []))

    func append(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        state.withLock { s in
            s.partial += text
            while let newline = s.partial.firstIndex(of: "\n") {
                s.lines.append(String(s.partial[..<newline]))
                s.partial = String(s.partial[s.partial.index(after: newline)...])
            }
        }
    }

    var lines: [String] { state.withLock { $0.lines } }
    var text: String { state.withLock { ($0.lines + [$0.partial]).joined(separator: "\n") } }
}

/// A child process started with `ip netns exec NS …`, its stdout read as JSON lines.
final class NamespaceProcess: Sendable {
    private let process: Process
    private let out = LineCollector()
    private let err = LineCollector()

    init(namespace: TestNamespace, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = ["netns", "exec", namespace.name] + arguments
        let outPipe = Pipe(), errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        self.process = process
        outPipe.fileHandleForReading.readabilityHandler = { [out] in out.append($0.availableData) }
        errPipe.fileHandleForReading.readabilityHandler = { [err] in err.append($0.availableData) }
        try process.run()
    }

    var stderr: String { err.text }
    var stdout: String { out.text }

    /// Waits until a JSON line satisfies `match`; returns it, or nil after `timeout`.
    func wait(timeout: Duration, _ match: ([String: Any]) -> Bool) async -> [String: Any]? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            for line in out.lines {
                if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], match(object) {
                    return object
                }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Sends `signal` to the helper (`ip netns exec` runs it in its own process).
    func signal(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    func terminate() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

@Suite(.serialized, .enabled(if: Netns.available, Comment(rawValue: Netns.unavailableReason)),
       .enabled(if: Zeroconf.available, Comment(rawValue: Zeroconf.unavailableReason)))
struct DiscoveryInteropTests {
    let type = try! ServiceType("syncpeer-test")

    /// Runs the helper (browse or register) with `zeroconf`'s interpreter in `namespace`, and
    /// returns once its sockets are open ("ready"): under a full run's load, starting python
    /// and importing zeroconf alone took minutes, and each test's own waits (what it must see
    /// within 30 s) count from here.
    private func peer(_ zeroconf: Zeroconf, in namespace: TestNamespace, _ arguments: [String]) async throws -> NamespaceProcess {
        let process = try NamespaceProcess(namespace: namespace, [try zeroconf.python(), Zeroconf.helper] + arguments)
        let ready = await process.wait(timeout: .seconds(600)) { ($0["event"] as? String) == "ready" }
        if ready == nil {
            process.terminate()
            throw HelperNotStarted(what: "\(zeroconf.testDescription) \(arguments.first ?? "")", stderr: process.stderr)
        }
        return process
    }

    struct HelperNotStarted: Error, CustomStringConvertible {
        let what: String
        let stderr: String
        var description: String { "the \(what) helper did not start within 600 s; stderr: \(stderr)" }
    }

    /// Which releases these tests ran against (printing the version opens no socket).
    @Test(arguments: Zeroconf.allCases)
    func version(_ zeroconf: Zeroconf) throws {
        let output = try runCommand(try zeroconf.python(), [Zeroconf.helper, "version"])
        let line = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        let version = try #require(line?["version"] as? String, "\(output)")
        print("interop with \(zeroconf.testDescription) \(version)")
    }

    /// python-zeroconf browses (namespace 1) and resolves our advertised service (namespace 2),
    /// ours published before it starts browsing (`oursFirst`) or after.
    @Test(arguments: Zeroconf.allCases, [true, false])
    func zeroconfSeesOurService(_ zeroconf: Zeroconf, oursFirst: Bool) async throws {
        let (ns1, ns2, _, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        let thread = try NetnsThread(ns2)
        defer { thread.finish() }
        let names = NameLog()
        let factory = NodeFactory(thread: thread, interfaces: .automatic)
        let advertiser = try factory.advertiser(type, name: "Interop Ours", port: 46001, id: "OURS-ID",
                                                info: ["nick": "ours", "os": "linux"], start: false, names: names)
        defer { advertiser.stop() }
        if oursFirst {
            try thread.run { try advertiser.start() }
            try await waitUntil(timeout: .seconds(10)) { !names.all.isEmpty }
        }
        let browser = try await peer(zeroconf, in: ns1, ["browse", type.name, "10.99.0.1", "180"])
        defer { browser.terminate() }
        if !oursFirst {
            try thread.run { try advertiser.start() }  // python's browser is up ("ready")
        }

        let line = await browser.wait(timeout: .seconds(30)) { ($0["event"] as? String) == "added" }
        let seen = try #require(line, "\(zeroconf.testDescription) did not report our service; stdout: \(browser.stdout) stderr: \(browser.stderr)")
        #expect(seen["name"] as? String == "Interop Ours._syncpeer-test._tcp.local.")
        #expect(seen["port"] as? Int == 46001)
        #expect(seen["addresses"] as? [String] == ["10.99.0.2"])
        let properties = try #require(seen["properties"] as? [String: String])
        #expect(properties == ["id": "OURS-ID", "v": "1", "nick": "ours", "os": "linux"])

        // Our goodbye reaches it.
        advertiser.stop()
        let removed = await browser.wait(timeout: .seconds(30)) { ($0["event"] as? String) == "removed" }
        #expect(removed != nil, "\(zeroconf.testDescription) did not see our goodbye; stderr: \(browser.stderr)")
    }

    /// python-zeroconf registers a service of our type (namespace 1) before our browser
    /// starts (`theirsFirst`: found only through the answers to our queries, which 0.47.3
    /// sends with its malformed NSEC) or after (found through its announcements).
    @Test(arguments: Zeroconf.allCases, [true, false])
    func ourBrowserFindsZeroconfService(_ zeroconf: Zeroconf, theirsFirst: Bool) async throws {
        let (ns1, ns2, _, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        let thread = try NetnsThread(ns2)
        defer { thread.finish() }
        var started: (ServiceBrowser, EventLog)?
        if !theirsFirst { started = try NodeFactory(thread: thread, interfaces: .automatic).browser(type) }
        // Registered until the test has looked (SIGUSR1 below), at most 120 s: a fixed 6 s
        // stay ended before a loaded whole-suite run's browser started (3 of 5 runs on 5 Dec).
        let registrar = try await peer(zeroconf, in: ns1, ["register", type.name, "ZC Peer", "47001", "10.99.0.1", "120",
                                                     "id=ZC-ID", "v=2", "color=blue"])
        defer { registrar.terminate() }
        if theirsFirst {
            let registered = await registrar.wait(timeout: .seconds(20)) { $0["registered"] != nil }
            try #require(registered != nil, "zeroconf did not register; stderr: \(registrar.stderr)")
            started = try NodeFactory(thread: thread, interfaces: .automatic).browser(type)
        }
        let (browser, log) = try #require(started)
        defer { browser.stop() }

        let found = await log.wait(timeout: .seconds(30)) { $0.isFound("ZC Peer") }
        try #require(found != nil, "our browser did not find the \(zeroconf.testDescription) service; stdout: \(registrar.stdout); stderr: \(registrar.stderr); events: \(log.all)")
        let instance = try #require(log.found("ZC Peer"))
        #expect(instance.port == 47001)
        #expect(instance.deviceID == "ZC-ID")
        #expect(instance.protocolVersion == 2)
        #expect(instance.info == ["color": "blue"])
        #expect(instance.addresses == [IPv4Address(10, 99, 0, 1)])
        #expect(instance.hostName == "zc-peer.local")

        // It unregisters (goodbye packets): lost.
        registrar.signal(SIGUSR1)
        let lost = await log.wait(timeout: .seconds(30)) { $0.isLost("ZC Peer") }
        #expect(lost != nil, "no lost event after zeroconf unregistered; events: \(log.all)")
    }

    /// IPv6 only (link-local addresses, no IPv4 on the link), both directions: python-zeroconf
    /// resolves our service to our link-local address, and our browser finds its service
    /// at its link-local address scoped to the link.
    @Test(arguments: Zeroconf.allCases)
    func ipv6OnlyBothDirections(_ zeroconf: Zeroconf) async throws {
        let (ns1, ns2, _, vb) = try TestNamespace.vethPair(ipv4: false, ipv6: true)
        defer { ns1.remove(); ns2.remove() }
        let thread = try NetnsThread(ns2)
        defer { thread.finish() }
        let factory = NodeFactory(thread: thread, interfaces: .automatic)
        let advertiser = try factory.advertiser(type, name: "Six Ours", port: 46004, id: "OURS-ID")
        defer { advertiser.stop() }
        let (browser, log) = try factory.browser(type, ignoring: "OURS-ID")
        defer { browser.stop() }
        let theirBrowser = try await peer(zeroconf, in: ns1, ["browse", type.name, "v6", "60"])
        defer { theirBrowser.terminate() }
        let registrar = try await peer(zeroconf, in: ns1, ["register", type.name, "Six Theirs", "47004", "v6:fe80::1", "60", "id=ZC-ID"])
        defer { registrar.terminate() }

        let line = await theirBrowser.wait(timeout: .seconds(30)) { ($0["name"] as? String)?.hasPrefix("Six Ours.") == true }
        let seen = try #require(line, "\(zeroconf.testDescription) did not resolve our service over IPv6; stderr: \(theirBrowser.stderr)")
        print("\(zeroconf.testDescription) over IPv6 only resolved us to \(seen["addresses6"] ?? "?")")
        #expect(seen["addresses6"] as? [String] == ["fe80::2"] && seen["port"] as? Int == 46004)

        let found = await log.wait(timeout: .seconds(30)) { $0.isFound("Six Theirs") }
        try #require(found != nil, "our browser did not find the \(zeroconf.testDescription) service over IPv6; stderr: \(registrar.stderr); events: \(log.all)")
        let theirs = try #require(log.found("Six Theirs"))
        #expect(theirs.ipv6Addresses == [IPv6Address("fe80::1%\(vb)")!] && theirs.addresses.isEmpty && theirs.port == 47004)
    }

    /// python-zeroconf holds "Clash" first; our advertiser then probes for "Clash", sees the
    /// name answered (with 0.47.3's malformed NSEC beside it) and takes "Clash (2)".
    @Test(arguments: Zeroconf.allCases)
    func nameTakenByZeroconfIsNotTakenAgain(_ zeroconf: Zeroconf) async throws {
        let (ns1, ns2, _, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        let thread = try NetnsThread(ns2)
        defer { thread.finish() }
        let registrar = try await peer(zeroconf, in: ns1, ["register", type.name, "Clash", "47002", "10.99.0.1", "30"])
        defer { registrar.terminate() }
        let registered = await registrar.wait(timeout: .seconds(20)) { $0["registered"] != nil }
        let theirs = try #require(registered?["registered"] as? String, "stderr: \(registrar.stderr)")
        #expect(theirs == "Clash._syncpeer-test._tcp.local.")

        let names = NameLog()
        let advertiser = try NodeFactory(thread: thread, interfaces: .automatic)
            .advertiser(type, name: "Clash", port: 46002, id: "OURS-ID", names: names)
        defer { advertiser.stop() }
        try await waitUntil(timeout: .seconds(10)) { !names.all.isEmpty }
        #expect(names.all == ["Clash (2)"], "registered as \(names.all) beside \(zeroconf.testDescription)'s \(theirs)")
        #expect(advertiser.registeredName == "Clash (2)")
    }

    /// We hold "Clash" first; python-zeroconf then registers "Clash" (renaming allowed):
    /// it must end with another name, and we keep ours.
    @Test(arguments: Zeroconf.allCases)
    func nameWeHoldIsNotTakenByZeroconf(_ zeroconf: Zeroconf) async throws {
        let (ns1, ns2, _, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        let thread = try NetnsThread(ns2)
        defer { thread.finish() }
        let names = NameLog()
        let advertiser = try NodeFactory(thread: thread, interfaces: .automatic)
            .advertiser(type, name: "Clash", port: 46003, id: "OURS-ID", names: names)
        defer { advertiser.stop() }
        try await waitUntil(timeout: .seconds(10)) { !names.all.isEmpty }
        #expect(names.all == ["Clash"])

        let registrar = try await peer(zeroconf, in: ns1, ["register", type.name, "Clash", "47003", "10.99.0.1", "30"])
        defer { registrar.terminate() }
        let outcome = await registrar.wait(timeout: .seconds(20)) { $0["registered"] != nil || $0["conflict"] != nil }
        let line = try #require(outcome, "stderr: \(registrar.stderr)")
        if let theirs = line["registered"] as? String {
            #expect(theirs != "Clash._syncpeer-test._tcp.local.", "\(zeroconf.testDescription) took the name we hold")
        }
        try await Task.sleep(for: .seconds(1))
        #expect(advertiser.registeredName == "Clash", "we lost our name: \(names.all)")
        print("\(zeroconf.testDescription) beside our 'Clash': \(line)")
    }
}

/// Polls `condition` every 20 ms; throws when it is still false after `timeout`.
func waitUntil(timeout: Duration, _ condition: @Sendable () -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { throw Hung(description: "condition not met in \(timeout)") }
        try await Task.sleep(for: .milliseconds(20))
    }
}
