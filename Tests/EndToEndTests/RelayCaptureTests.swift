import Foundation
import Glibc
import TestKit
import Testing

/// What a relay's link carries, captured: two daemons and the real strelaysrv in a network
/// namespace of the test's own, every TCP payload to or from the relay's port recorded by a
/// raw packet socket on that namespace's loopback.
@Suite(.serialized, .enabled(if: GlobalServer.available && TestNetns.available, "needs syncthing-relaysrv and ip netns"))
struct RelayCaptureTests {
    /// The capture: TCP payloads of IPv4 packets on `lo` to or from `port`, appended to `out`.
    static let capture = """
        import socket, struct, sys
        port, out = int(sys.argv[1]), open(sys.argv[2], 'wb')
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
        s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: no packet dropped under load
        s.bind(('lo', 0))
        while True:
            frame = s.recv(70000)
            if frame[12:14] != b'\\x08\\x00': continue
            ip = frame[14:]
            if ip[9] != 6: continue
            tcp = ip[(ip[0] & 15) * 4:]
            if port not in struct.unpack('!HH', tcp[:4]): continue
            out.write(tcp[(tcp[12] >> 4) * 4:])
            out.flush()
        """

    /// Pairing by certificate ID and a file sent, both through the relay only: the capture
    /// holds the whole file's worth of bytes, yet neither the file's name, nor a line of its
    /// text, nor either device's name.
    @Test func theRelaysLinkCarriesNoPlaintextNameOrContent() throws {
        let namespace = try TestNamespace.loopbackOnly()
        defer { namespace.remove() }
        let relay = try GlobalServer.relay(namespace: namespace.name)
        defer { relay.stop() }
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let script = env.home("capture.py"), recorded = env.home("relay-link.bin")
        try Self.capture.write(toFile: script, atomically: true, encoding: .utf8)
        let capture = Process()
        capture.executableURL = URL(fileURLWithPath: TestNetns.ipPath)
        capture.arguments = ["netns", "exec", namespace.name, "/usr/bin/python3", script, "\(relay.port)", recorded]
        try capture.run()
        // SIGKILL: the child inherits the test's signal mask, where SIGTERM is blocked.
        defer { if capture.isRunning { kill(capture.processIdentifier, SIGKILL); capture.waitUntilExit() } }
        Thread.sleep(forTimeInterval: 0.5)  // the socket is bound before any relay traffic

        let url = "relay://127.0.0.1:\(relay.port)/?id=\(relay.printedID)"
        let alice = try DaemonProcess(env, name: "alice-tellurium", arguments: ["--auto-accept", "--relay", url], namespace: namespace.name)
        let bob = try DaemonProcess(env, name: "bob-vanadium", arguments: ["--auto-accept", "--relay", url], namespace: namespace.name)
        defer { _ = alice.stop(); _ = bob.stop() }
        let paired = try env.pairByCertificateID(bob, with: alice).result
        try #require(paired.status == 0, "\(paired.stderr)")
        try bob.waitForState("connected", peer: "alice-tellurium", timeout: 20)

        let name = "merger-plan-orchid.txt"
        let line = "The orchid merger closes on the third of March at forty-two dollars a share.\n"
        let text = String(repeating: line, count: 4_000)
        let source = env.home(name)
        try text.write(toFile: source, atomically: true, encoding: .utf8)
        let sent = try env.cli(bob, ["send", source, "--to", "alice-tellurium"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(try String(contentsOfFile: alice.home + "/Downloads/" + name, encoding: .utf8) == text)

        kill(capture.processIdentifier, SIGKILL)
        capture.waitUntilExit()
        let link = try Data(contentsOf: URL(fileURLWithPath: recorded))
        // The premise: the capture saw the transfer (the file went through the relay).
        #expect(link.count >= text.utf8.count, "captured \(link.count) bytes")
        for secret in [name, "orchid merger", "forty-two dollars", "alice-tellurium", "bob-vanadium"] {
            #expect(link.range(of: Data(secret.utf8)) == nil, "'\(secret)' in the clear on the relay's link")
        }
    }
}
