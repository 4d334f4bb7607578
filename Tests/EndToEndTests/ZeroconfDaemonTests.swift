import Foundation
import Glibc
import Synchronization
import Testing

/// Debian's python3-zeroconf (0.47.3 on bookworm, whose answers carry an NSEC record with
/// 16-bit bitmap fields) as another node's responder, in a namespace of the test's own.
enum DebianZeroconf {
    static let python = "/usr/bin/python3"
    static let helper = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("PeerNetTests/Discovery/Interop/zeroconf_peer.py").path
    static let available: Bool = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-c", "import zeroconf"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()
}

/// The helper running `register` inside a namespace; its JSON lines as they come.
final class ZeroconfRegistration: @unchecked Sendable {
    // @unchecked: `process` is set up in init and only read afterwards; the output is in `box`.
    private let process = Process()
    private let box = OutputBox()

    final class OutputBox: Sendable {
        let text = Mutex<String>("")
    }

    init(in namespace: TestNamespace, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: TestNetns.ipPath)
        process.arguments = ["netns", "exec", namespace.name, DebianZeroconf.python, DebianZeroconf.helper] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        out.fileHandleForReading.readabilityHandler = { [box] handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            box.text.withLock { $0 += text }
        }
        try process.run()
    }

    /// Waits until a line contains `text`.
    func wait(for text: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if box.text.withLock({ $0.contains(text) }) { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    var output: String { box.text.withLock { $0 } }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// Issue 14.2 with a real daemon: a python-zeroconf 0.47.3 service registered before the
/// daemon starts is found (through the answers to its queries), and the daemon does not
/// publish the name that service holds.
@Suite(.serialized, .enabled(if: TestNetns.available, Comment(rawValue: TestNetns.unavailableReason)),
       .enabled(if: DebianZeroconf.available, Comment(rawValue: "python3-zeroconf is not installed (scripts/install-deps.sh installs it)")))
struct ZeroconfDaemonTests {
    @Test func serviceRegisteredBeforeTheDaemonIsFoundAndItsNameAvoided() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (ns1, ns2, _, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        // A real device ID for the zeroconf service's TXT record (from a throw-away home).
        let other = env.home("other")
        #expect(try env.run(["--home", other, "init", "--name", "other"]).status == 0)
        let idLine = try env.run(["--home", other, "id", "--json"]).stdout
        let object = try JSONSerialization.jsonObject(with: Data(idLine.utf8)) as? [String: Any]
        let dashed = try #require(object?["id"] as? String)
        let compact = dashed.filter { $0 != "-" }

        let registration = try ZeroconfRegistration(in: ns1, ["register", "syncpeer", "alice", "47005", "10.99.0.1", "60",
                                                              "id=\(compact)", "v=1"])
        defer { registration.stop() }
        #expect(registration.wait(for: "registered", timeout: 20), "zeroconf did not register: \(registration.output)")

        let alice = try DaemonProcess(env, name: "alice", in: ns2)
        defer { alice.stop() }
        let registered = try alice.waitFor("registered", timeout: 10)
        #expect(registered["instance"] as? String == "alice (2)", "the daemon took the name zeroconf holds: \(registered)")
        let found = try alice.waitForFound("alice")
        #expect(found["address"] as? String == "10.99.0.1:47005")
        #expect(peerID(found) == dashed)
        let browse = jsonLines(try env.cli(alice, ["browse", "--json"]).stdout)
        #expect(browse.count == 1 && browse.first?["instance"] as? String == "alice", "\(browse)")
    }
}
