import Foundation
import Glibc
import Testing

/// Helpers shared by the discovery tests.
extension DaemonProcess {
    /// Starts a daemon with discovery on inside `namespace` (never the root one).
    convenience init(_ env: SyncpeerRunner, name: String, home: String? = nil, in namespace: TestNamespace,
                     arguments: [String] = [], environment: [String: String] = [:], listen: String = "0.0.0.0:0") throws {
        try self.init(env, name: name, home: home, arguments: arguments, environment: environment,
                      namespace: namespace.name, discovery: true, listen: listen)
    }

    /// Waits for `found` of the peer whose instance is `instance`.
    @discardableResult
    func waitForFound(_ instance: String, after skip: Int = 0, timeout: Double = 5) throws -> [String: Any] {
        try waitFor("found", after: skip, timeout: timeout) { $0["instance"] as? String == instance }
    }

    @discardableResult
    func waitForLost(_ instance: String, after skip: Int = 0, timeout: Double = 5) throws -> [String: Any] {
        try waitFor("lost", after: skip, timeout: timeout) { $0["instance"] as? String == instance }
    }

    func wasFound(_ instance: String) -> Bool {
        events("found").contains { $0["instance"] as? String == instance }
    }
}

/// Milliseconds since 1970, as the daemons' event times.
func wallMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

func eventTime(_ event: [String: Any]) -> Int64 { (event["time"] as? NSNumber)?.int64Value ?? 0 }

func peerName(_ entry: [String: Any]) -> String? { (entry["peer"] as? [String: Any])?["name"] as? String }

func peerID(_ entry: [String: Any]) -> String? { (entry["peer"] as? [String: Any])?["id"] as? String }

/// The objects printed one per line (NDJSON).
func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
}

/// Real daemons with discovery on, each inside network namespaces the test creates (one
/// namespace with multicast on `lo`, or two joined by veth) and removes afterwards.
@Suite(.serialized, .enabled(if: TestNetns.available, Comment(rawValue: TestNetns.unavailableReason)))
struct DiscoveryTests {
    // How long discovery takes is printed here and measured by `make bench`; these tests
    // assert what happens (found, lost, connected), each within the waits' generous timeouts,
    // never how fast: under a loaded machine a wall-time bound fails for no fault of ours.

    @Test func twoDaemonsInOneNamespaceFindEachOther() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let ns = try TestNamespace.loopbackOnly()
        defer { ns.remove() }

        let start = wallMilliseconds()
        let alice = try DaemonProcess(env, name: "alice", in: ns, arguments: ["--interface", "lo", "--info", "room=kitchen"])
        let bob = try DaemonProcess(env, name: "bob", in: ns, arguments: ["--interface", "lo"])
        defer { alice.stop(); bob.stop() }

        let bobSeen = try alice.waitForFound("bob")
        let aliceSeen = try bob.waitForFound("alice")
        let (a, b) = (eventTime(bobSeen) - start, eventTime(aliceSeen) - start)
        print("discovery in one namespace (lo): alice found bob \(a) ms and bob found alice \(b) ms after the first start")

        // What a found event carries: name, device ID, address and port, info.
        #expect(peerID(aliceSeen) == (try alice.deviceID(env)))
        #expect(aliceSeen["port"] as? Int == Int(alice.port))
        #expect(aliceSeen["address"] as? String == "127.0.0.1:\(alice.port)")
        #expect(aliceSeen["addresses"] as? [String] == ["127.0.0.1:\(alice.port)"])
        #expect(aliceSeen["info"] as? [String: String] == ["room": "kitchen"])
        #expect(bobSeen["info"] as? [String: String] == [:])
        // Each publishes its own name and never reports itself.
        #expect(try alice.waitFor("registered")["instance"] as? String == "alice")
        #expect(!alice.wasFound("alice") && !bob.wasFound("bob"))

        // browse lists the other, not paired; peers merges it in as discovered.
        let browse = jsonLines(try env.cli(alice, ["browse", "--json"]).stdout)
        #expect(browse.count == 1)
        #expect(peerName(browse[0]) == "bob" && browse[0]["paired"] as? Bool == false)
        #expect(browse[0]["address"] as? String == "127.0.0.1:\(bob.port)")
        let text = try env.cli(alice, ["browse"]).stdout
        #expect(text.hasPrefix("bob (") && text.contains("127.0.0.1:\(bob.port)  not paired"), "\(text)")
        let peers = jsonLines(try env.cli(alice, ["peers", "--json"]).stdout)
        #expect(peers.count == 1)
        #expect(peerName(peers[0]) == "bob")
        #expect(peers[0]["discovered"] as? Bool == true && peers[0]["paired"] as? Bool == false)
        #expect(peers[0]["state"] as? String == "notConnected")
        #expect(peers[0]["address"] as? String == "127.0.0.1:\(bob.port)")
        // The same short instance name everywhere: browse, peers and the found event.
        #expect(browse[0]["instance"] as? String == "bob" && peers[0]["instance"] as? String == "bob", "\(browse) \(peers)")
        #expect(bobSeen["instance"] as? String == "bob")
        let document = try JSONDocument()
        let problems = document.problems(browse[0], as: "command browse") + document.problems(peers[0], as: "command peers")
        #expect(problems.isEmpty, "\(problems)")
        // Discovery never bypasses pairing: nobody dialled anybody.
        #expect(alice.events("invitation").isEmpty && bob.events("invitation").isEmpty)
        #expect(alice.events("state").isEmpty && bob.events("state").isEmpty)

        let status = try JSONSerialization.jsonObject(with: Data(try env.cli(alice, ["visibility", "--json"]).stdout.utf8)) as? [String: Any]
        #expect(status?["visible"] as? Bool == true && status?["instance"] as? String == "alice")
        #expect(document.problems(status ?? [:], as: "command visibility").isEmpty, "\(status ?? [:])")
    }

    @Test func twoNamespacesOverVethPairByNameAndReconnectThroughDiscovery() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (ns1, ns2, _, _) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }

        // Default interfaces: every up, multicast, non-loopback one (the veth end).
        let start = wallMilliseconds()
        var alice = try DaemonProcess(env, name: "alice", in: ns1)
        var bob = try DaemonProcess(env, name: "bob", in: ns2)
        defer { alice.stop(); bob.stop() }
        let bobSeen = try alice.waitForFound("bob")
        let aliceSeen = try bob.waitForFound("alice")
        let (a, b) = (eventTime(bobSeen) - start, eventTime(aliceSeen) - start)
        print("discovery over veth: alice found bob \(a) ms and bob found alice \(b) ms after the first start")
        #expect(bobSeen["address"] as? String == "10.99.0.2:\(bob.port)")
        #expect(aliceSeen["address"] as? String == "10.99.0.1:\(alice.port)")

        // Pair by the discovered name; both ends show the same code.
        let pairing = try PairingProcess(env, from: alice, to: bob, target: "bob")
        let invitation = try bob.waitFor("invitation")
        #expect(peerName(invitation) == "alice")
        #expect((invitation["address"] as? String)?.hasPrefix("10.99.0.1:") == true)
        let code = try #require(invitation["code"] as? String)
        #expect(try alice.waitFor("invitation_pending")["code"] as? String == code, "both ends show the same code")
        #expect(try env.cli(bob, ["accept", try #require(invitation["invitation"] as? String)]).status == 0)
        let paired = try pairing.finish()
        #expect(paired.status == 0, "\(paired.stderr)")
        try alice.waitForState("connected", peer: "bob")
        try bob.waitForState("connected", peer: "alice")
        let listed = jsonLines(try env.cli(alice, ["peers", "--json"]).stdout)
        #expect(listed.count == 1 && listed[0]["paired"] as? Bool == true && listed[0]["discovered"] as? Bool == true)
        #expect((listed[0]["addresses"] as? [String])?.first == "10.99.0.2:\(bob.port)", "the discovered address is stored")

        // bob restarts (on a new port): alice reports it lost (goodbye), then found, then connected.
        var mark = alice.events.count
        let stopAt = wallMilliseconds()
        #expect(bob.stop() == 0)
        let lost = try alice.waitForLost("bob", after: mark)
        print("goodbye over veth: lost \(eventTime(lost) - stopAt) ms after SIGTERM")
        mark = alice.events.count
        let restart = wallMilliseconds()
        bob = try DaemonProcess(env, name: "bob", home: bob.home, in: ns2)
        try alice.waitForFound("bob", after: mark)
        let back = try alice.waitForState("connected", peer: "bob", after: mark)
        print("restart of bob: connected again \(eventTime(back) - restart) ms after its start")

        // Both restart on new ports: the stored addresses are stale, only discovery can
        // bring them together.
        #expect(alice.stop() == 0)
        #expect(bob.stop() == 0)
        let bothStart = wallMilliseconds()
        alice = try DaemonProcess(env, name: "alice", home: alice.home, in: ns1)
        bob = try DaemonProcess(env, name: "bob", home: bob.home, in: ns2)
        let aliceBack = try alice.waitForState("connected", peer: "bob", timeout: 10)
        let bobBack = try bob.waitForState("connected", peer: "alice", timeout: 10)
        print("restart of both on new ports: connected \(eventTime(aliceBack) - bothStart) ms and \(eventTime(bobBack) - bothStart) ms after the first start")
        let connecting = alice.events("state").first { $0["state"] as? String == "connecting" }
        let address = connecting?["address"] as? String
        #expect(address == "10.99.0.2:\(bob.port)" || address?.hasPrefix("10.99.0.2:") == true, "\(String(describing: connecting))")
        #expect(alice.events("refused").isEmpty && bob.events("refused").isEmpty)
    }

    @Test func stoppedDaemonIsLostByGoodbyeAndUnpluggedOneAfterItsTTL() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (ns1, ns2, _, link2) = try TestNamespace.vethPair()
        defer { ns1.remove(); ns2.remove() }
        let ttl = ["SYNCPEER_MDNS_TTL": "3"]
        let alice = try DaemonProcess(env, name: "alice", in: ns1, environment: ttl)
        var bob = try DaemonProcess(env, name: "bob", in: ns2, environment: ttl)
        defer { alice.stop(); bob.stop() }
        try alice.waitForFound("bob")

        // Stopped: goodbye packets (TTL 0).
        var mark = alice.events.count
        let stopAt = wallMilliseconds()
        #expect(bob.stop() == 0)
        let lost = try alice.waitForLost("bob", after: mark)
        let goodbye = eventTime(lost) - stopAt
        print("stopped daemon: lost \(goodbye) ms after SIGTERM (goodbye)")

        // Found again, and still found after several TTLs (refresh queries keep it).
        mark = alice.events.count
        bob = try DaemonProcess(env, name: "bob", home: bob.home, in: ns2, environment: ttl)
        try alice.waitForFound("bob", after: mark)
        Thread.sleep(forTimeInterval: 4)
        #expect(alice.events.dropFirst(mark).filter { $0["event"] as? String == "lost" }.isEmpty, "lost while still there")

        // Unplugged: bob keeps running (it says no goodbye), but nothing passes any more:
        // its records expire at most one TTL (3 s) after the last refresh alice received.
        mark = alice.events.count
        let unplugAt = wallMilliseconds()
        try TestNetns.ip(["-n", ns2.name, "link", "set", link2, "down"])
        let expired = try alice.waitForLost("bob", after: mark, timeout: 10)
        let after = eventTime(expired) - unplugAt
        print("unplugged daemon (TTL 3 s): lost \(after) ms after the link went down")
        // Lost within the 10 s wait although bob's default TTLs are 120 s and 75 min: the 3 s
        // TTL it announced is what expired.
        #expect(bob.process.isRunning, "bob was not stopped: the loss is the TTL expiring, not a goodbye")
    }

    @Test func invisibleDaemonIsNeverReportedUntilVisibilityOn() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let ns = try TestNamespace.loopbackOnly()
        defer { ns.remove() }
        let alice = try DaemonProcess(env, name: "alice", in: ns, arguments: ["--interface", "lo"])
        let bob = try DaemonProcess(env, name: "bob", in: ns, arguments: ["--interface", "lo", "--invisible"])
        defer { alice.stop(); bob.stop() }

        // bob browses (it finds alice) but is never reported itself.
        try bob.waitForFound("alice")
        Thread.sleep(forTimeInterval: 3)
        #expect(!alice.wasFound("bob"), "an invisible node was reported: \(alice.events("found"))")
        #expect(bob.events("registered").isEmpty)
        #expect(try env.cli(bob, ["visibility"]).stdout == "invisible to others\n")
        #expect(jsonLines(try env.cli(alice, ["browse", "--json"]).stdout).isEmpty)

        // visibility on: announced at once.
        let on = wallMilliseconds()
        let shown = try env.cli(bob, ["visibility", "on"])
        #expect(shown.status == 0, "\(shown.stderr)")
        let found = try alice.waitForFound("bob")
        print("visibility on: found \(eventTime(found) - on) ms later")
        try bob.waitFor("visibility") { $0["state"] as? String == "visible" }

        // visibility off: goodbye; alice reports it lost.
        let off = wallMilliseconds()
        #expect(try env.cli(bob, ["visibility", "off"]).stdout == "invisible to others\n")
        let lost = try alice.waitForLost("bob")
        print("visibility off: lost \(eventTime(lost) - off) ms later")
    }

    @Test func differentServiceTypesDoNotSeeEachOther() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let ns = try TestNamespace.loopbackOnly()
        defer { ns.remove() }
        let alice = try DaemonProcess(env, name: "alice", in: ns, arguments: ["--interface", "lo", "--service-type", "team-a"])
        let bob = try DaemonProcess(env, name: "bob", in: ns, arguments: ["--interface", "lo", "--service-type", "team-b"])
        let carol = try DaemonProcess(env, name: "carol", in: ns, arguments: ["--interface", "lo", "--service-type", "team-a"])
        defer { alice.stop(); bob.stop(); carol.stop() }

        try alice.waitForFound("carol")
        try carol.waitForFound("alice")
        Thread.sleep(forTimeInterval: 3)
        #expect(!alice.wasFound("bob") && !carol.wasFound("bob"))
        #expect(bob.events("found").isEmpty, "\(bob.events("found"))")
        let visibility = try JSONSerialization.jsonObject(with: Data(try env.cli(bob, ["visibility", "--json"]).stdout.utf8)) as? [String: Any]
        #expect(visibility?["serviceType"] as? String == "_team-b._tcp")
    }

    @Test func twoDaemonsWithTheSameNameBothStayReachable() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let ns = try TestNamespace.loopbackOnly()
        defer { ns.remove() }
        let lo = ["--interface", "lo", "--auto-accept"]
        let first = try DaemonProcess(env, name: "twin", home: env.home("twin1"), in: ns, arguments: lo)
        defer { first.stop() }
        #expect(try first.waitFor("registered")["instance"] as? String == "twin")
        let second = try DaemonProcess(env, name: "twin", home: env.home("twin2"), in: ns, arguments: lo)
        defer { second.stop() }
        let renamed = try second.waitFor("registered")
        #expect(renamed["instance"] as? String == "twin (2)")
        #expect((renamed["reason"] as? String)?.contains("taken") == true)
        let observer = try DaemonProcess(env, name: "observer", in: ns, arguments: lo)
        defer { observer.stop() }

        // A third node reports both, each with its own device ID and port.
        let one = try observer.waitForFound("twin")
        let two = try observer.waitForFound("twin (2)")
        let firstID = try first.deviceID(env), secondID = try second.deviceID(env)
        #expect(peerID(one) == firstID && one["port"] as? Int == Int(first.port))
        #expect(peerID(two) == secondID && two["port"] as? Int == Int(second.port))
        #expect(jsonLines(try env.cli(observer, ["browse", "--json"]).stdout).compactMap(peerName).sorted() == ["twin", "twin (2)"])

        // Both are reachable by their discovered names.
        let toSecond = try env.cli(observer, ["pair", "twin (2)", "--json"])
        #expect(toSecond.status == 0, "\(toSecond.stderr)")
        #expect(jsonLines(toSecond.stdout).last.flatMap(peerID) == secondID)
        let toFirst = try env.cli(second, ["pair", "twin", "--json"])
        #expect(toFirst.status == 0, "\(toFirst.stderr)")
        #expect(jsonLines(toFirst.stdout).last.flatMap(peerID) == firstID)
    }
}

/// Flags that break the discovery rules: exit 2 before anything starts. These daemons get
/// `--no-discovery` too, so even a wrongly accepted flag could not multicast.
struct DiscoveryFlagTests {
    @Test(arguments: [
        (["--service-type", "Sync_Peer"], "only lowercase ASCII letters, digits and hyphens"),
        (["--service-type", "a-very-long-service"], "at most 15 are allowed"),
        (["--service-type", ""], "service type is empty"),
        (["--service-type", "sync--peer"], "two adjacent hyphens"),
        (["--service-type", "-sync"], "starts or ends with a hyphen"),
        (["--service-type", "1234"], "at least one lowercase ASCII letter"),
        (["--info", "k=" + String(repeating: "x", count: 300)], "each key=value pair must be at most 255 bytes"),
        (["--info", "a=" + String(repeating: "x", count: 250), "--info", "b=" + String(repeating: "y", count: 250)],
         "the pairs together must be at most 400 bytes"),
        (["--info", "id=mine"], "is reserved"),
        (["--info", "=x"], "keys must not be empty"),
        (["--info", "novalue"], "needs a '='"),
    ])
    func badDiscoveryFlagsExitTwoNamingTheRule(_ flags: [String], _ rule: String) throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let home = env.home("alice")
        #expect(try env.run(["--home", home, "init", "--name", "alice"]).status == 0)
        let result = try env.run(["--home", home, "daemon", "--listen", "127.0.0.1:0", "--no-discovery"] + flags)
        #expect(result.status == 2, "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.hasPrefix("syncpeer: error: "))
        #expect(result.stderr.contains(rule), "\(result.stderr)")
    }

    @Test func visibilityTakesOnOrOff() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let result = try env.run(["--home", env.home("x"), "visibility", "maybe"])
        #expect(result.status == 2)
        #expect(result.stderr == "syncpeer: error: visibility takes 'on' or 'off', got 'maybe'\n")
    }

    @Test func browseAndVisibilityNeedDiscovery() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        defer { alice.stop() }
        for command in [["browse"], ["visibility", "on"]] {
            let result = try env.cli(alice, command)
            #expect(result.status == 3)
            #expect(result.stderr == "syncpeer: error: discovery is off (the daemon runs with --no-discovery)\n")
        }
    }
}

/// Static peers (`--peer HOST:PORT`), for networks where multicast is filtered: no
/// discovery at all (root namespace, loopback), the same pairing and reconnection.
@Suite(.serialized)
struct StaticPeerTests {
    @Test func staticPeerIsDialledAtStartStoredAfterPairingAndRedialled() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        defer { alice.stop() }
        // bob knows only alice's address: it dials it at start, which is an invitation.
        var bob = try DaemonProcess(env, name: "bob", arguments: ["--peer", alice.address])
        defer { bob.stop() }
        let invitation = try alice.waitFor("invitation")
        #expect(peerName(invitation) == "bob")
        #expect(try env.cli(alice, ["accept", try #require(invitation["invitation"] as? String)]).status == 0)
        try bob.waitForState("connected", peer: "alice")

        // The address is stored with the peer in bob's index.
        let listed = jsonLines(try env.cli(bob, ["peers", "--json"]).stdout)
        #expect(listed.count == 1 && listed[0]["paired"] as? Bool == true)
        #expect((listed[0]["addresses"] as? [String])?.first == alice.address)
        #expect(listed[0]["discovered"] as? Bool == false)

        // bob restarts without --peer: the stored address is dialled, no prompt this time.
        #expect(bob.stop() == 0)
        let mark = alice.events.count
        bob = try DaemonProcess(env, name: "bob", home: bob.home)
        try bob.waitForState("connected", peer: "alice")
        try alice.waitForState("connected", peer: "bob", after: mark)
        #expect(alice.events.dropFirst(mark).allSatisfy { $0["event"] as? String != "invitation" })
    }
}
