import Foundation
import Glibc
import TestKit
import Testing

/// Issue 39's scenario: alice and bob at two homes behind NAT (masquerade, nothing in), the
/// real Syncthing discovery server and relay in an "internet", carol at a routable address
/// there (`NatTopology`, `NatWorld`). What a user at each end sees.
@Suite(.serialized, .enabled(if: GlobalServer.available && NatTopology.available,
                             "needs ip netns (root), nft (nftables) and syncthing-discosrv/-relaysrv: scripts/install-deps.sh"))
struct NatScenarioTests {
    /// The premise of every test here: the homes cannot reach each other, nor be reached from
    /// the internet, though each reaches the internet.
    @Test func homesReachTheInternetButNotEachOther() throws {
        let world = try NatWorld()
        defer { world.stop() }
        let bob = try world.daemon("bob", home: 1)
        let internet = NatTopology.internetAddress
        #expect(world.net.connects(from: world.net.homes[0], to: internet, port: world.relay.port))
        #expect(!world.net.connects(from: world.net.homes[0], to: NatTopology.routerAddress(1), port: bob.port))
        #expect(!world.net.connects(from: world.net.homes[0], to: NatTopology.homeAddress, port: bob.port))
        #expect(!world.net.connects(from: world.net.internet, to: NatTopology.routerAddress(1), port: bob.port))
    }

    /// (a) Pairing by certificate ID (looked up at the discovery server, whose address for
    /// alice is her router's and answers nothing, then through the relay), and 200 MiB sent
    /// through the relay with the live line on a terminal, whole.
    @Test func homesPairByIDThroughTheRelayAndSend200MiB() throws {
        let world = try NatWorld()
        defer { world.stop() }
        let (alice, bob) = try world.relayedHomes()
        let source = world.env.home("holiday.mkv")
        try TestFiles.random(source, size: 200 << 20)
        let before = try [alice.pid, bob.pid].map { try ProcessFigures(pid: $0).cpuSeconds }
        let started = Date()
        let terminal = try PseudoTerminal(["--home", alice.home, "send", source, "--to", "bob"],
                                          environment: ["PATH": "/usr/bin:/bin", "HOME": world.env.root.path, "TERM": "xterm", "NO_COLOR": "1"],
                                          columns: 100)
        let status = terminal.wait()
        let seconds = Date().timeIntervalSince(started)
        let frames = PseudoTerminal.frames(terminal.raw)
        let after = try [alice.pid, bob.pid].map { try ProcessFigures(pid: $0) }
        print("NAT scenario: 200 MiB from home 1 to home 2 through strelaysrv in \(String(format: "%.1f", seconds)) s (debug build); "
              + "CPU alice \(String(format: "%.1f", after[0].cpuSeconds - before[0])) s, bob \(String(format: "%.1f", after[1].cpuSeconds - before[1])) s; "
              + "peak RSS alice \(after[0].peakKiB / 1024) MiB, bob \(after[1].peakKiB / 1024) MiB")
        #expect(status == 0, "\(frames.suffix(5))")
        #expect(frames.contains { $0.hasPrefix("holiday.mkv ") && $0.contains("%") }, "no live line: \(frames.prefix(5))")
        #expect(frames.contains { $0.hasPrefix("Sent holiday.mkv to bob") }, "\(frames.suffix(3))")
        try TestFiles.expectSame(source, bob.home + "/Downloads/holiday.mkv")
        #expect(world.path(alice, "bob") == "relay \(NatTopology.internetAddress)")
        try? FileManager.default.removeItem(atPath: source)
        try? FileManager.default.removeItem(atPath: bob.home + "/Downloads/holiday.mkv")
    }

    /// (a) A folder shared through the relay syncs both ways; edits made on both sides while
    /// the relay is down meet when it is back: the newer edit wins at the path, the older is
    /// kept as the conflict copy named after its device, on both homes.
    @Test func aFolderSyncsBothWaysThroughTheRelayAndAConflictFollowsTheRules() throws {
        let world = try NatWorld()
        defer { world.stop() }
        let receive = ["SYNCPEER_WATCH_DELAY_MS": "200", "SYNCPEER_RESCAN_MS": "3000"]
        let (alice, bob) = try world.relayedHomes(environment: receive)
        let docs = world.env.home("alice-docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "agenda".write(toFile: docs + "/notes.txt", atomically: true, encoding: .utf8)
        let shared = try world.env.cli(alice, ["share", docs, "--with", "bob"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let bobDocs = bob.home + "/Downloads/alice-docs"
        func text(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }
        try world.eventually("notes.txt reaches bob") { text(bobDocs + "/notes.txt") == "agenda" }
        try "from bob".write(toFile: bobDocs + "/from-bob.txt", atomically: true, encoding: .utf8)
        try "from alice".write(toFile: docs + "/from-alice.txt", atomically: true, encoding: .utf8)
        try world.eventually("each side's new file reaches the other") {
            text(docs + "/from-bob.txt") == "from bob" && text(bobDocs + "/from-alice.txt") == "from alice"
        }

        // The relay, their only way to each other, goes down; both edit; it comes back.
        world.relay = try world.relay.killedAndRestarted(after: 1) {
            try world.eventually("both see the other gone") {
                world.path(alice, "bob") == nil && world.path(bob, "alice") == nil
            }
            // Dated 2023 before it takes the name: the watcher never sees it with a newer date.
            let draft = world.env.home("alice-draft.txt")
            try "alice's edit, older".write(toFile: draft, atomically: true, encoding: .utf8)
            try TestFiles.setMtime(draft, 1_700_000_000_000_000_000)
            #expect(rename(draft, docs + "/notes.txt") == 0)
            try "bob's edit".write(toFile: bobDocs + "/notes.txt", atomically: true, encoding: .utf8)
            Thread.sleep(forTimeInterval: 1)  // both scanned while apart
        }
        func copies(_ root: String) -> [String] {
            FolderSyncTests.tree(root).keys.filter { $0.contains(".sync-conflict-") }.sorted()
        }
        try world.eventually("one conflict copy on both sides", timeout: 60) {
            copies(docs).count == 1 && copies(docs) == copies(bobDocs) && FolderSyncTests.tree(docs) == FolderSyncTests.tree(bobDocs)
        }
        for root in [docs, bobDocs] {
            #expect(text(root + "/notes.txt") == "bob's edit")
            #expect(text(root + "/" + copies(root)[0]) == "alice's edit, older")
        }
        let listed = try world.env.cli(bob, ["conflicts"])
        #expect(listed.stdout.contains("notes.sync-conflict-"), "\(listed.stdout)")
    }

    /// (b) The relay a transfer runs through is killed by its PID midway and started again:
    /// the homes join it again, alice reaches bob through it, and the transfer resumes, whole,
    /// with at most one send window sent twice.
    @Test func aTransferBetweenHomesResumesAfterTheRelayIsKilledAndRestarted() throws {
        let world = try NatWorld()
        defer { world.stop() }
        let (alice, bob) = try world.relayedHomes(environment: ["SYNCPEER_SEND_RATE": "4000000"])
        let source = world.env.home("relayed.bin")
        try TestFiles.random(source, size: 24 << 20)
        let send = try world.env.startJSONSend(home: alice.home, source, to: "bob")
        try bob.waitForReceived(4 << 20)
        world.relay = try world.relay.killedAndRestarted(after: 1)
        try alice.waitFor("transfer", timeout: 20) { $0["state"] as? String == "paused" }
        let final = try world.env.finishJSONSend(send, of: source, to: bob, timeout: 90)
        let resent = try #require((final["resent"] as? NSNumber)?.int64Value)
        print("NAT scenario: relay killed and restarted mid-transfer: \(resent) bytes re-sent (bound \(ResumeTests.inFlightBound))")
        #expect(resent <= ResumeTests.inFlightBound)
        #expect(world.path(alice, "bob") == "relay \(NatTopology.internetAddress)")
    }

    /// (c) carol, at a routable address, is paired by her certificate ID from a home and
    /// reached directly at the address the discovery server saw (no relay, though both
    /// joined one); carol sees alice at her router's address.
    @Test func aNodeWithARoutableAddressIsReachedDirectlyFromAHome() throws {
        let world = try NatWorld()
        defer { world.stop() }
        let carol = try world.daemon("carol", home: nil)
        let alice = try world.daemon("alice", home: 0)
        let carolsAddress = "\(NatTopology.internetAddress):\(carol.port)"
        try world.eventually("carol announced, as the address the server saw") { try world.announced(carol).contains("tcp://\(carolsAddress)") }
        let paired = try world.env.pairByCertificateID(alice, with: carol).result
        try #require(paired.status == 0, "\(paired.stderr)")
        try alice.waitForState("connected", peer: "carol", timeout: 30)
        #expect(world.path(alice, "carol") == "direct \(carolsAddress)")
        #expect(world.path(carol, "alice")?.hasPrefix("direct \(NatTopology.routerAddress(0)):") == true, "\(world.path(carol, "alice") ?? "none")")
        let listed = try world.env.cli(alice, ["peers"]).stdout
        #expect(listed.contains("connected  paired  direct \(carolsAddress)") && !listed.contains("relay "), "\(listed)")
    }

    /// (d) A relayed pair of homes moves to direct when bob's router gets a port forward to
    /// him: alice's periodic direct try reaches him at the address the discovery server saw,
    /// both ends keep the direct session, and a transfer under way carries on, whole.
    @Test func aRelayedPairMovesToDirectWhenAPortForwardAppears() throws {
        let world = try NatWorld()
        defer { world.stop() }
        let (alice, bob) = try world.relayedHomes(environment: ["SYNCPEER_SEND_RATE": "4000000"])
        let source = world.env.home("moving.bin")
        try TestFiles.random(source, size: 24 << 20)
        let send = try world.env.startJSONSend(home: alice.home, source, to: "bob")
        try bob.waitForReceived(2 << 20)
        #expect(world.path(alice, "bob") == "relay \(NatTopology.internetAddress)", "moved before a route existed")

        try world.net.forwardPort(home: 1, port: bob.port)
        try world.eventually("alice reaches bob directly at his router's forwarded port") {
            world.path(alice, "bob") == "direct \(NatTopology.routerAddress(1)):\(bob.port)"
        }
        try world.eventually("bob's session with alice is direct too") {
            world.path(bob, "alice")?.hasPrefix("direct ") == true
        }
        _ = try world.env.finishJSONSend(send, of: source, to: bob)
    }
}
