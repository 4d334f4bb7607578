import Foundation
import Testing

/// Sessions between real daemons on 127.0.0.1: pairing, messages, disconnects, restarts.
@Suite(.serialized)
struct SessionTests {
    func peerList(_ env: SyncpeerRunner, _ daemon: DaemonProcess) throws -> [[String: Any]] {
        let result = try env.cli(daemon, ["peers", "--json"])
        try #require(result.status == 0, "\(result.stderr)")
        return result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func name(_ entry: [String: Any]) -> String? { (entry["peer"] as? [String: Any])?["name"] as? String }

    @Test func pairingShowsTheSameCodeOnBothEndsAndPinsBothKeys() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob")

        let pairing = try PairingProcess(env, from: alice, to: bob, context: "holiday photos")
        let invitation = try bob.waitFor("invitation")
        #expect(invitation["context"] as? String == "holiday photos")
        #expect((invitation["peer"] as? [String: Any])?["name"] as? String == "alice")
        let bobCode = try #require(invitation["code"] as? String)
        #expect(bobCode.wholeMatch(of: #/[0-9]{6}/#) != nil)
        let pending = try alice.waitFor("invitation_pending")
        #expect(pending["code"] as? String == bobCode, "both ends show the same code")

        // The invitation is listed, with the same code, until it is answered.
        let listed = try env.cli(bob, ["invitations", "--json"])
        #expect(listed.stdout.contains("\"code\":\"\(bobCode)\""))
        let id = try #require(invitation["invitation"] as? String)
        #expect(try env.cli(bob, ["accept", id]).status == 0)
        let paired = try pairing.finish()
        #expect(paired.status == 0, "\(paired.stderr)")
        #expect(paired.stdout.contains("\"name\":\"bob\""))

        try alice.waitForState("connected", peer: "bob")
        try bob.waitForState("connected", peer: "alice")
        for (daemon, other) in [(alice, "bob"), (bob, "alice")] {
            let list = try peerList(env, daemon)
            #expect(list.count == 1)
            #expect(name(list[0]) == other)
            #expect(list[0]["paired"] as? Bool == true)
            #expect(list[0]["state"] as? String == "connected")
        }
        #expect(try env.cli(bob, ["invitations"]).stdout == "no open invitations\n")
    }

    @Test func tenThousandMessagesEachWayArriveInOrder() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob")
        _ = try env.pair(alice, bob)
        try bob.waitForState("connected", peer: "alice")

        let count = 10_000
        let fromAlice = (0..<count).map { "a\($0)" }.joined(separator: "\n") + "\n"
        let fromBob = (0..<count).map { "b\($0)" }.joined(separator: "\n") + "\n"
        // Both directions at once, through `syncpeer chat` reading standard input.
        let group = DispatchGroup()
        nonisolated(unsafe) var results: [SyncpeerRunner.Result?] = [nil, nil]
        for (i, (daemon, peer, text)) in [(alice, "bob", fromAlice), (bob, "alice", fromBob)].enumerated() {
            group.enter()
            Thread {
                results[i] = try? env.cli(daemon, ["chat", peer], stdin: text)
                group.leave()
            }.start()
        }
        group.wait()
        #expect(results[0]?.status == 0, "\(results[0]?.stderr ?? "")")
        #expect(results[1]?.status == 0, "\(results[1]?.stderr ?? "")")

        for (daemon, prefix) in [(bob, "a"), (alice, "b")] {
            try daemon.waitFor("message", timeout: 60) { $0["text"] as? String == "\(prefix)\(count - 1)" }
            let texts = daemon.events("message").compactMap { $0["text"] as? String }
            #expect(texts.count == count, "\(daemon.name) got \(texts.count) messages")
            #expect(texts == (0..<count).map { "\(prefix)\($0)" }, "in order, none lost or repeated")
            let ids = daemon.events("message").compactMap { ($0["id"] as? NSNumber)?.intValue }
            #expect(ids == Array(1...count))
        }
    }

    @Test func msgFromTheCommandLineIsDeliveredWithTheSendersName() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob")
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")
        let sent = try env.cli(alice, ["msg", "--to", "bob", "héllo, bob"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.stdout.hasPrefix("sent to bob ("))
        let message = try bob.waitFor("message")
        #expect(message["text"] as? String == "héllo, bob")
        #expect((message["peer"] as? [String: Any])?["name"] as? String == "alice")
        // A device ID prefix works as PEER too.
        let bobID = try #require((try peerList(env, alice).first?["peer"] as? [String: Any])?["id"] as? String)
        #expect(try env.cli(alice, ["msg", "--to", String(bobID.prefix(5)).lowercased(), "by id"]).status == 0)
        try bob.waitFor("message") { $0["text"] as? String == "by id" }
        // Unknown peers are a clear error with exit code 3.
        let unknown = try env.cli(alice, ["msg", "--to", "carol", "x"])
        #expect(unknown.status == 3)
        #expect(unknown.stderr == "syncpeer: error: no known peer matches 'carol'; see 'syncpeer peers' (pair first with 'syncpeer pair HOST:PORT')\n")
    }

    @Test(arguments: ["decline", "expire"])
    func declinedOrExpiredInvitationLeavesNoTrust(_ how: String) throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--invitation-timeout", "1"])
        let pairing = try PairingProcess(env, from: alice, to: bob, json: false)
        let invitation = try bob.waitFor("invitation")
        if how == "decline" {
            let id = try #require(invitation["invitation"] as? String)
            #expect(try env.cli(bob, ["decline", id]).status == 0)
        }
        let result = try pairing.finish()
        #expect(result.status == 1)
        #expect(result.stderr == "syncpeer: error: bob \(how == "decline" ? "declined" : "expired") the invitation\n")
        try bob.waitFor("invitation_closed") { $0["outcome"] as? String == (how == "decline" ? "declined" : "expired") }
        try alice.waitForState("notConnected", peer: "bob")
        #expect(try peerList(env, alice).isEmpty)
        #expect(try peerList(env, bob).isEmpty)
        #expect(alice.events("paired").isEmpty && bob.events("paired").isEmpty)
        // Alice cannot message bob: he is not a peer.
        #expect(try env.cli(alice, ["msg", "--to", "bob", "x"]).status == 3)
    }

    @Test func aPairedPeerReconnectsAfterEitherSideRestarts() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        var bob = try DaemonProcess(env, name: "bob")
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")

        // Bob restarts (on a new port: alice must learn it from bob's redial).
        #expect(bob.stop() == 0)
        try alice.waitForState("notConnected", peer: "bob")
        bob = try DaemonProcess(env, name: "bob")
        try bob.waitForState("connected", peer: "alice", timeout: 15)
        #expect(try env.cli(alice, ["msg", "--to", "bob", "after bob restarted"]).status == 0)
        try bob.waitFor("message") { $0["text"] as? String == "after bob restarted" }

        // Alice restarts: no prompt, no invitation on either side.
        #expect(alice.stop() == 0)
        let alice2 = try DaemonProcess(env, name: "alice", home: alice.home)
        try alice2.waitForState("connected", peer: "bob", timeout: 15)
        #expect(try env.cli(bob, ["msg", "--to", "alice", "after alice restarted"]).status == 0)
        try alice2.waitFor("message") { $0["text"] as? String == "after alice restarted" }
        #expect(alice2.events("invitation").isEmpty && bob.events("invitation").isEmpty)
    }

    @Test func killingOneSideIsNoticedWithinTenSeconds() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob")
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")
        bob.crash()
        try alice.waitForState("notConnected", peer: "bob", timeout: 10)
    }

    /// A peer that stops answering without closing (hung, unplugged) is noticed by the
    /// keepalive: SIGSTOP freezes it with its sockets open.
    @Test func aFrozenPeerIsNoticedByKeepalive() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob")
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")
        kill(bob.pid, SIGSTOP)
        defer { kill(bob.pid, SIGCONT) }
        let event = try alice.waitForState("notConnected", peer: "bob", timeout: 10)
        #expect((event["reason"] as? String)?.contains("no answer") == true, "\(event)")
    }

    @Test func disconnectEndsTheSessionOnBothEnds() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob")
        _ = try env.pair(alice, bob)
        try bob.waitForState("connected", peer: "alice")
        let result = try env.cli(alice, ["disconnect", "bob"])
        #expect(result.status == 0, "\(result.stderr)")
        try alice.waitForState("notConnected", peer: "bob")
        try bob.waitForState("notConnected", peer: "alice")
        // Still paired, just not connected.
        let list = try peerList(env, alice)
        #expect(list.first?["paired"] as? Bool == true)
        #expect(list.first?["state"] as? String == "notConnected")
        #expect(try env.cli(alice, ["msg", "--to", "bob", "x"]).status == 3)
    }

    @Test func unpairForgetsThePeer() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob")
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")
        let result = try env.cli(alice, ["unpair", "bob"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("Unpaired bob ("))
        try alice.waitForState("notConnected", peer: "bob")
        #expect(try peerList(env, alice).isEmpty)
        #expect(try env.cli(alice, ["unpair", "bob"]).status == 3)
    }

    @Test func oneDaemonPerHomeAndClearErrorsWithoutOne() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let second = try env.run(["--home", alice.home, "daemon", "--listen", "127.0.0.1:0", "--no-discovery"])
        #expect(second.status != 0)
        #expect(second.stderr.contains("(pid \(alice.pid))"), "\(second.stderr)")
        #expect(second.stderr.filter { $0 == "\n" }.count == 1)

        let lonely = env.home("lonely")
        #expect(try env.run(["--home", lonely, "init", "--name", "lonely"]).status == 0)
        for arguments in [["peers"], ["invitations"], ["msg", "--to", "x", "y"], ["events"], ["pair", "127.0.0.1:9"]] {
            let result = try env.run(["--home", lonely] + arguments)
            #expect(result.status == 3, "\(arguments)")
            #expect(result.stderr == "syncpeer: error: no syncpeer daemon is running for \(lonely): start one with 'syncpeer --home \(lonely) daemon' (in another terminal, or in the background with '&')\n")
        }
        #expect(alice.stop() == 0)
    }
}
