import Foundation
import Testing

/// Issue 13 point 4, the ends of a relationship: `unpair` tells the peer (which drops its
/// pairing too instead of listing a peer that can never connect), and `unshare` withdraws a
/// folder offer the peer has not answered yet.
@Suite(.serialized)
struct PeerLifecycleTests {
    @Test func unpairTellsThePeer() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob")
        defer { alice.stop(); bob.stop() }
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")
        try bob.waitForState("connected", peer: "alice")
        let mark = bob.events.count

        let unpaired = try env.cli(alice, ["unpair", "bob"])
        #expect(unpaired.status == 0, "\(unpaired.stderr)")
        let ended = try bob.waitForState("notConnected", peer: "alice", after: mark)
        #expect((ended["reason"] as? String)?.contains("alice unpaired this device") == true, "\(ended)")
        // bob no longer lists alice as paired, and does not dial her again.
        let peers = jsonLines(try env.cli(bob, ["peers", "--json"]).stdout)
        #expect(!peers.contains { peerName($0) == "alice" && $0["paired"] as? Bool == true }, "\(peers)")
        Thread.sleep(forTimeInterval: 2)   // several redial periods of the tests' timers
        #expect(!bob.events.dropFirst(mark).contains { $0["event"] as? String == "state" && $0["state"] as? String == "connecting" },
                "bob redialled: \(bob.events.dropFirst(mark))")
        // Both can pair again, and that works as the first time.
        _ = try env.pair(bob, alice)
        try alice.waitForState("connected", peer: "bob", after: 0)
    }

    @Test func unshareWithdrawsAnOfferNotAnsweredYet() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let docs = env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "one".write(toFile: docs + "/one.txt", atomically: true, encoding: .utf8)
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--receive-dir", env.home("bob-recv")])
        defer { alice.stop(); bob.stop() }
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")
        #expect(try env.cli(alice, ["share", docs, "--with", "bob"]).status == 0)
        let offer = try bob.waitFor("share_offer", timeout: 15)
        let folderID = try #require(offer["folder"] as? String)
        #expect(try env.cli(bob, ["status"]).stdout.contains("syncpeer accept \(folderID)"))

        #expect(try env.cli(alice, ["unshare", docs]).status == 0)
        let withdrawn = try bob.waitFor("folder", timeout: 15) { $0["folder"] as? String == folderID && $0["state"] as? String == "unshared" }
        #expect((withdrawn["reason"] as? String)?.contains("stopped sharing it") == true, "\(withdrawn)")
        let status = try env.cli(bob, ["status"]).stdout
        #expect(!status.contains(folderID), "the offer is gone: \(status)")
        let late = try env.cli(bob, ["accept", folderID])
        #expect(late.status != 0, "a withdrawn offer cannot be accepted: \(late.stdout)")
        #expect(!FileManager.default.fileExists(atPath: env.home("bob-recv") + "/docs"))
    }
}
