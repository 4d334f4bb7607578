import Foundation
import Testing

/// `syncpeer pair --code`: two daemons that share nothing but a wormhole code (through a
/// local mailbox server) end paired and connected, with no invitation to accept and no
/// 6-digit comparison; a plain `wormhole` client given such a code is refused, and nothing
/// is paired.
@Suite(.serialized)
struct PairByCodeTests {
    func withFixture(_ body: (WormholeFixture) throws -> Void) throws {
        guard WormholeFixture.available else {
            Issue.record(Comment(rawValue: WormholeFixture.missingReason))
            return
        }
        let fixture = try WormholeFixture(namespace: TestNetns.available)
        defer { fixture.stop() }
        try body(fixture)
    }

    /// The code `pair --code` printed ("syncpeer pair --code CODE"), waiting up to 30 s.
    func code(_ process: WormholeFixture.Background) throws -> String {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let match = process.stderr.firstMatch(of: /pair --code (\d+-[a-z0-9-]+)/) { return String(match.1) }
            guard process.process.isRunning else { break }
            usleep(50_000)
        }
        throw WormholeFixture.Failure(description: "no code printed: \(process.stderr)")
    }

    @Test func twoDaemonsPairWithACode() throws {
        try withFixture { f in
            let alice = try DaemonProcess(f.runner, name: "alice")
            let bob = try DaemonProcess(f.runner, name: "bob")
            defer {
                alice.stop()
                bob.stop()
            }
            let mailbox = ["--mailbox", f.mailboxURL]
            let first = try f.syncpeer(["--home", alice.home, "pair", "--code"] + mailbox)
            let code = try code(first)
            #expect(first.stderr.contains("syncpeer pair --code \(code)"), "alice says what to run: \(first.stderr)")
            let second = try f.syncpeer(["--home", bob.home, "pair", "--code", code, "--json"] + mailbox)
            #expect(second.wait() == 0, "bob: \(second.stderr)")
            #expect(first.wait() == 0, "alice: \(first.stderr)")
            #expect(first.stdout.contains("Paired with bob"), "\(first.stdout)")
            let result = try JSONContractTests().check("command pair",
                                                       SyncpeerRunner.Result(status: 0, stdout: second.stdout, stderr: second.stderr)).last
            let bobID = try #require(f.runner.cli(bob, ["id", "--json"]).stdout.firstMatch(of: /"id":"([A-Z0-9-]+)"/)?.1)
            let aliceID = try #require(f.runner.cli(alice, ["id", "--json"]).stdout.firstMatch(of: /"id":"([A-Z0-9-]+)"/)?.1)
            #expect((result?["peer"] as? [String: Any])?["id"] as? String == String(aliceID), "\(second.stdout)")

            // Both pinned the other's key (the device ID matches) and connect without a prompt.
            try alice.waitForState("connected", peer: "bob", timeout: 15)
            try bob.waitForState("connected", peer: "alice", timeout: 15)
            #expect(!alice.events.contains { $0["event"] as? String == "invitation" }, "no invitation to accept")
            #expect(!bob.events.contains { $0["event"] as? String == "invitation" }, "no invitation to accept")
            let peers = try f.runner.cli(alice, ["peers", "--json"])
            #expect(peers.stdout.contains("\"paired\":true") && peers.stdout.contains(String(bobID)), "\(peers.stdout)")
            let message = try f.runner.cli(bob, ["msg", "--to", "alice", "hello through the code"])
            #expect(message.status == 0, "\(message.stderr)")
            try alice.waitFor("message", timeout: 10) { $0["text"] as? String == "hello through the code" }
        }
    }

    /// Two daemons that listen on a wildcard address (`0.0.0.0:0`), each in its own network
    /// namespace joined by a veth pair (10.99.0.1 and 10.99.0.2), discovery off: `pair --code`
    /// sends each daemon's interface addresses with its port (a wildcard would tell the other
    /// side nothing and be dropped), so they end paired AND connected, each holding the other's
    /// concrete address.
    @Test func wildcardListenersPairAndConnectWithoutDiscovery() throws {
        guard TestNetns.available else {
            Issue.record(Comment(rawValue: TestNetns.unavailableReason))
            return
        }
        try withFixture { f in
            let lan = try TestNamespace.vethPair()
            defer {
                lan.first.remove()
                lan.second.remove()
            }
            let alice = try DaemonProcess(f.runner, name: "alice", namespace: lan.first.name, listen: "0.0.0.0:0")
            let bob = try DaemonProcess(f.runner, name: "bob", namespace: lan.second.name, listen: "0.0.0.0:0")
            defer {
                alice.stop()
                bob.stop()
            }
            let mailbox = ["--mailbox", f.mailboxURL]
            let first = try f.syncpeer(["--home", alice.home, "pair", "--code"] + mailbox)
            let second = try f.syncpeer(["--home", bob.home, "pair", "--code", try code(first)] + mailbox)
            #expect(second.wait() == 0, "bob: \(second.stderr)")
            #expect(first.wait() == 0, "alice: \(first.stderr)")
            try alice.waitForState("connected", peer: "bob", timeout: 15)
            try bob.waitForState("connected", peer: "alice", timeout: 15)
            let alicePeers = try f.runner.cli(alice, ["peers", "--json"]).stdout
            #expect(alicePeers.contains("\"10.99.0.2:\(bob.port)\""), "alice holds bob's concrete address: \(alicePeers)")
            let bobPeers = try f.runner.cli(bob, ["peers", "--json"]).stdout
            #expect(bobPeers.contains("\"10.99.0.1:\(alice.port)\""), "bob holds alice's concrete address: \(bobPeers)")
            #expect(!alicePeers.contains("0.0.0.0") && !bobPeers.contains("0.0.0.0"))
        }
    }

    /// A node whose name is already a paired peer's is refused by the node that has that
    /// peer; the other end undoes its half, so neither is left paired with the other.
    @Test func aNewKeyCannotTakeAPairedPeersName() throws {
        try withFixture { f in
            let alice = try DaemonProcess(f.runner, name: "alice")
            let bob = try DaemonProcess(f.runner, name: "bob")
            let impostor = try DaemonProcess(f.runner, name: "bob", home: f.runner.home("impostor"))
            defer {
                for daemon in [alice, bob, impostor] { daemon.stop() }
            }
            let mailbox = ["--mailbox", f.mailboxURL]
            func pair(_ a: DaemonProcess, _ b: DaemonProcess) throws -> (Int32, Int32, String) {
                let first = try f.syncpeer(["--home", a.home, "pair", "--code"] + mailbox)
                let second = try f.syncpeer(["--home", b.home, "pair", "--code", try code(first)] + mailbox)
                return (first.wait(), second.wait(), first.stderr + second.stderr)
            }
            let (a, b, _) = try pair(alice, bob)
            #expect(a == 0 && b == 0)
            let (toAlice, fromImpostor, stderr) = try pair(alice, impostor)
            #expect(toAlice == 1 && fromImpostor == 1, "\(stderr)")
            #expect(stderr.contains("another paired peer is called bob"), "\(stderr)")
            let alicePeers = try f.runner.cli(alice, ["peers", "--json"]).stdout
            #expect(alicePeers.components(separatedBy: "\"paired\":true").count == 2, "alice keeps only bob: \(alicePeers)")
            let impostorPeers = try f.runner.cli(impostor, ["peers", "--json"]).stdout
            #expect(!impostorPeers.contains("\"paired\":true"), "the impostor's half is undone: \(impostorPeers)")
        }
    }

    /// A plain Magic Wormhole client that joins a pairing code is told it is for `syncpeer
    /// pair --code` and gets no key; the syncpeer end fails and pairs with nobody.
    @Test func aPlainWormholeClientIsRefused() throws {
        try withFixture { f in
            let alice = try DaemonProcess(f.runner, name: "alice")
            defer { alice.stop() }
            let first = try f.syncpeer(["--home", alice.home, "pair", "--code", "--mailbox", f.mailboxURL])
            let receiver = try f.wormhole("receive", [try code(first)])
            #expect(receiver.wait() != 0)
            #expect(first.wait() == 1, "alice: \(first.stderr)")
            #expect(first.stderr.contains("not 'syncpeer pair --code'"), "\(first.stderr)")
            #expect(receiver.stderr.contains("syncpeer pair --code"), "wormhole: \(receiver.stderr)")
            #expect(!receiver.stdout.contains("syncpeer_pair") && !receiver.stderr.contains("syncpeer_pair"))
            let peers = try f.runner.cli(alice, ["peers", "--json"])
            #expect(!peers.stdout.contains("\"paired\":true"), "\(peers.stdout)")
        }
    }
}
