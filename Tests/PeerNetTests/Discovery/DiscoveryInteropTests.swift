import Foundation
import PeerNet
import Synchronization
import Testing

/// python3-zeroconf (Debian) as an independent peer, in its own namespace.
enum Zeroconf {
    static let python = "/usr/bin/python3"
    static let helper = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Interop/zeroconf_peer.py").path

    static let available: Bool = (try? runCommand(python, ["-c", "import zeroconf"])) != nil
    static let unavailableReason = "python3-zeroconf is not installed for /usr/bin/python3 (scripts/install-deps.sh installs it)"
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

    func terminate() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

@Suite(.serialized, .enabled(if: Netns.available, Comment(rawValue: Netns.unavailableReason)),
       .enabled(if: Zeroconf.available, Comment(rawValue: Zeroconf.unavailableReason)))
struct DiscoveryInteropTests {
    let type = try! ServiceType("syncpeer-test")

    /// python-zeroconf browses (namespace 1) and resolves our advertised service (namespace 2).
    @Test func zeroconfSeesOurService() async throws {
        let (ns1, ns2, _, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        let thread = try NetnsThread(ns2)
        defer { thread.finish() }
        let peer = try NamespaceProcess(namespace: ns1, [Zeroconf.python, Zeroconf.helper, "browse", type.name, "10.99.0.1", "180"])
        defer { peer.terminate() }
        try await Task.sleep(for: .milliseconds(500))  // let Python start and bind

        let start = ContinuousClock.now
        let advertiser = try NodeFactory(thread: thread, interfaces: .automatic)
            .advertiser(type, name: "Interop Ours", port: 46001, id: "OURS-ID", info: ["nick": "ours", "os": "linux"])
        defer { advertiser.stop() }

        let line = await peer.wait(timeout: .seconds(60)) { ($0["event"] as? String) == "added" }
        let seen = try #require(line, "zeroconf did not report our service; stderr: \(peer.stderr)")
        print("python-zeroconf resolved our service after \(ContinuousClock.now - start)")
        #expect(seen["name"] as? String == "Interop Ours._syncpeer-test._tcp.local.")
        #expect(seen["port"] as? Int == 46001)
        #expect(seen["addresses"] as? [String] == ["10.99.0.2"])
        let properties = try #require(seen["properties"] as? [String: String])
        #expect(properties == ["id": "OURS-ID", "v": "1", "nick": "ours", "os": "linux"])

        // Our goodbye reaches it.
        advertiser.stop()
        let removed = await peer.wait(timeout: .seconds(60)) { ($0["event"] as? String) == "removed" }
        #expect(removed != nil, "zeroconf did not see our goodbye; stderr: \(peer.stderr)")
    }

    /// python-zeroconf registers a service of our type (namespace 1); our browser finds it.
    @Test func ourBrowserFindsZeroconfService() async throws {
        let (ns1, ns2, _, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        let thread = try NetnsThread(ns2)
        defer { thread.finish() }
        let (browser, log) = try NodeFactory(thread: thread, interfaces: .automatic).browser(type)
        defer { browser.stop() }

        let start = ContinuousClock.now
        let peer = try NamespaceProcess(namespace: ns1, [Zeroconf.python, Zeroconf.helper, "register", type.name,
                                                         "ZC Peer", "47001", "10.99.0.1", "20",
                                                         "id=ZC-ID", "v=2", "color=blue"])
        defer { peer.terminate() }

        let found = await log.wait(timeout: .seconds(60)) { $0.isFound("ZC Peer") }
        let event = try #require(found, "our browser did not find the zeroconf service; stderr: \(peer.stderr); events: \(log.all)")
        print("our browser found the python-zeroconf service after \(event.0 - start)")
        let instance = try #require(log.found("ZC Peer"))
        #expect(instance.port == 47001)
        #expect(instance.deviceID == "ZC-ID")
        #expect(instance.protocolVersion == 2)
        #expect(instance.info == ["color": "blue"])
        #expect(instance.addresses == [IPv4Address(10, 99, 0, 1)])
        #expect(instance.hostName == "zc-peer.local")

        // It unregisters after 6 s (goodbye packets): lost.
        let lost = await log.wait(timeout: .seconds(60)) { $0.isLost("ZC Peer") }
        #expect(lost != nil, "no lost event after zeroconf unregistered; events: \(log.all)")
    }
}
