import Foundation
import Glibc
import PeerCrypto
import PeerFiles
@testable import PeerNet
import PeerWire
import Testing

/// Floods against a real daemon on loopback, by unauthenticated and by paired peers, with
/// the daemon's memory, threads and open files measured before, during and after: what a
/// flood may cost stays bounded, and legitimate peers are still served. Floods are bounded
/// in count, go only to 127.0.0.0/8 and are scaled down to seconds, but stay above the caps.
@Suite(.serialized)
struct ResourceBoundsTests {
    /// Sessions and silent handshakes stay until the test ends them (no keepalive drops).
    static let patientEnvironment = [
        "SYNCPEER_KEEPALIVE_MS": "60000",
        "SYNCPEER_DEAD_PEER_MS": "120000",
        "SYNCPEER_HANDSHAKE_TIMEOUT_MS": "60000",
    ]

    /// `carol` pairs with `bob` while others flood; the invitation is found by name.
    private func pairDuringFlood(_ env: SyncpeerRunner, _ carol: DaemonProcess, _ bob: DaemonProcess) throws -> SyncpeerRunner.Result {
        let pairing = try PairingProcess(env, from: carol, to: bob)
        let invitation = try bob.waitFor("invitation", timeout: 15) { $0.peerName == "carol" }
        let accepted = try env.cli(bob, ["accept", try #require(invitation["invitation"] as? String)])
        #expect(accepted.status == 0, "accept: \(accepted.stderr)")
        return try pairing.finish()
    }

    // MARK: - Unauthenticated floods

    /// Bob (flooded) and carol (who pairs with bob meanwhile), and bob's figures at rest.
    private func floodTargets(_ env: SyncpeerRunner) throws -> (bob: DaemonProcess, carol: DaemonProcess, before: ProcessFigures) {
        let bob = try DaemonProcess(env, name: "bob", environment: Self.patientEnvironment)
        let carol = try DaemonProcess(env, name: "carol", environment: Self.patientEnvironment)
        return (bob, carol, try ProcessFigures(pid: bob.pid))
    }

    @Test func silentConnectionsFromFewAddressesDoNotLockOthersOut() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (bob, carol, before) = try floodTargets(env)

        // 6 addresses × 12 connections that never start their handshake: more than the
        // per-address cap (8) and, together, than the total (32).
        var silent: [TCPConnection] = []
        defer { for connection in silent { connection.close() } }
        for source in 2...7 {
            for _ in 0..<12 { silent.append(try loopbackConnection(from: "127.0.0.\(source)", to: bob.port)) }
        }
        Thread.sleep(forTimeInterval: 0.5)
        let during = try ProcessFigures(pid: bob.pid)

        // Another address still gets its handshake and pairs (the handshakes wait 60 s).
        let paired = try pairDuringFlood(env, carol, bob)
        #expect(paired.status == 0, "carol could not pair during the flood: \(paired.stderr)")

        for connection in silent { connection.close() }
        let after = try ProcessFigures.settle(pid: bob.pid, to: before, threads: 8, fds: 3)
        ProcessFigures.report("72 silent connections from 6 addresses", before, after, during: during)
        #expect(during.threads <= before.threads + 32 + 8, "a thread per silent connection beyond the cap: \(during)")
        #expect(after.threads <= before.threads + 8 && after.fds <= before.fds + 3, "not back to the baseline: \(after)")
        #expect(after.rssMiB - before.rssMiB < 32)
    }

    @Test func unpairedHandshakeFloodIsBoundedAndAnotherAddressStillPairs() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (bob, carol, before) = try floodTargets(env)

        // 10 addresses × 15 completed handshakes by fresh identities that stay connected
        // and never pair: 150 unpaired sessions asked for, at most 32 (4 per address) kept.
        var rogues: [SecureChannel] = []
        defer { for rogue in rogues { rogue.close() } }
        for source in 2...11 {
            for n in 0..<15 {
                // A refused one may fail late in its handshake: that is the daemon saying no.
                if let channel = try? roguePeer(from: "127.0.0.\(source)", to: bob.port, name: "flood-\(source)-\(n)") {
                    rogues.append(channel)
                }
            }
        }
        Thread.sleep(forTimeInterval: 0.5)
        let during = try ProcessFigures(pid: bob.pid)

        let paired = try pairDuringFlood(env, carol, bob)
        #expect(paired.status == 0, "carol could not pair during the flood: \(paired.stderr)")
        let invitations = try #require(try controlRequest(bob, #"{"id":1,"op":"invitations"}"#, within: 5))
        let open = invitations.components(separatedBy: "\"invitation\"").count - 1
        #expect(open <= 32, "\(open) open invitations")

        for rogue in rogues { rogue.close() }
        // Carol's session stays: one reader thread and one socket more than before. Dispatch's
        // idle pool threads (the sessions' serial send queues ran on them) may linger for a
        // while on a loaded machine (19 were seen 20 s later): the sockets must be back, the
        // threads within the cap of unpaired sessions (without the caps: 150 more).
        let after = try ProcessFigures.settle(pid: bob.pid, to: before, threads: 12, fds: 3)
        ProcessFigures.report("150 unpaired handshakes from 10 addresses", before, after, during: during)
        // A reader thread and a socket per unpaired session kept (32), and Dispatch's pool
        // threads (they linger idle for a while): without the caps it is 150 more.
        #expect(during.threads <= before.threads + 32 + 16, "threads grew with the flood: \(during)")
        #expect(during.fds <= before.fds + 32 + 6, "sockets grew with the flood: \(during)")
        #expect(during.peakMiB - before.rssMiB < 48, "memory grew with the flood: \(during)")
        #expect(after.threads <= before.threads + 32 && after.fds <= before.fds + 3,
                "not back to the baseline: \(after): \(ProcessFigures.threadNames(pid: bob.pid))")
        #expect(bob.events("error").contains { $0.reason.contains("refused a connection") }, "refusals are reported")
    }

    @Test func unpairedPeersCannotMakeTheDaemonReadLargeFrames() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (bob, _, before) = try floodTargets(env)

        // 8 unknown peers (8 addresses) each send a 16 MiB chunk frame before anyone accepted
        // them: 128 MiB the daemon would read only to drop.
        let done = DispatchGroup()
        for source in 2...9 {
            let channel = try roguePeer(from: "127.0.0.\(source)", to: bob.port, name: "big-\(source)")
            done.enter()
            Thread {
                defer { done.leave() }
                let frame = Frame.chunk(id: .random(), index: 0, data: [UInt8](repeating: 7, count: 16 << 20))
                _ = try? channel.send(frame)  // fails once the daemon hangs up
                Thread.sleep(forTimeInterval: 0.5)
                channel.close()
            }.start()
        }
        #expect(done.wait(timeout: .now() + 30) == .success, "the floods did not end")
        let after = try ProcessFigures.settle(pid: bob.pid, to: before, threads: 8, fds: 8)
        ProcessFigures.report("8 unpaired peers sending a 16 MiB frame each", before, after)
        #expect(after.peakMiB - before.rssMiB < 32, "the daemon read the frames: \(after)")
        #expect(bob.events("state").contains { $0.reason.contains("announced a body") },
                "\(bob.events("state").map(\.reason))")
    }

    // MARK: - A paired member that never reads

    @Test func memberThatNeverReadsItsBlocksIsBoundedAndDropped() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let bob = try DaemonProcess(env, name: "bob")
        let folder = env.home("bob-shared")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var generator = SystemRandomNumberGenerator()
        let content = (0..<(4 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try Data(content).write(to: URL(fileURLWithPath: folder + "/big.bin"))

        let rogue = try RogueMember(env, bob, name: "mallory")
        defer { rogue.close() }
        let shared = try env.cli(bob, ["share", folder, "--with", "mallory"])
        try #require(shared.status == 0, "share: \(shared.stderr)")
        let (folderID, entries) = try rogue.joinOffered()
        let file = try #require(entries.first { $0.path == "big.bin" })
        let chunk = try #require(try Manifest.decode(file.manifest).chunks.max { $0.size < $1.size })
        let before = try ProcessFigures(pid: bob.pid)

        // Ask for the largest chunk over and over (256 MiB of answers in all) and never read.
        let count = (256 << 20) / Int(chunk.size)
        let channel = rogue.channel
        let flooder = Thread {
            for n in 0..<count {
                let request = Frame.blockRequest(request: UInt32(n + 1), folder: folderID, path: "big.bin",
                                                 offset: chunk.offset, size: chunk.size, hash: chunk.hash.bytes)
                guard (try? channel.send(request)) != nil else { return }  // the daemon hung up
            }
        }
        flooder.start()
        let skip = bob.events.count
        let dropped = try bob.waitForState("notConnected", peer: "mallory", after: skip, timeout: 30)
        let during = try ProcessFigures(pid: bob.pid)
        rogue.close()
        let after = try ProcessFigures.settle(pid: bob.pid, to: before, threads: 8, fds: 2)
        ProcessFigures.report("\(count) block requests of \(chunk.size) bytes never read", before, after, during: during)
        print("[bounds] the member was dropped: \(dropped.reason)")
        #expect(dropped.reason.contains("stopped reading") || dropped.reason.contains("cannot send"), "\(dropped)")
        #expect(during.peakMiB - before.rssMiB < 48, "memory grew with unread answers: \(during)")
        #expect(after.threads <= before.threads + 8 && after.fds <= before.fds + 2, "\(after)")
    }

    @Test func tombstoneFloodFromAMemberIsRefusedBeyondItsQuota() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let allowance = 2_000
        let (bob, rogue, folderID) = try RogueMember.joinedFolder(env, environment: ["SYNCPEER_PEER_INDEX_ALLOWANCE": "\(allowance)"])
        defer { rogue.close() }
        let before = try ProcessFigures(pid: bob.pid)

        // 10 batches of 1,000 tombstones for paths that never existed, in a folder that does
        // not exist and at the top (where applying them records tombstones here too: those
        // must not raise the quota); our index has one file, so the quota is 2 × 1 + 2,000.
        for batch in 0..<10 {
            let entries = (1...1_000).map { n in
                let sequence = UInt64(batch * 1_000 + n)
                return rogue.tombstone(sequence % 2 == 0 ? "gone/\(sequence)" : "gone-\(sequence)", sequence)
            }
            try rogue.channel.send(.indexUpdate(folder: folderID, full: batch == 0, entries: entries))
        }
        // The acknowledgements say what the daemon stored: read them until it refuses.
        var acked: UInt64 = 0
        let refusal = try bob.waitFor("error", timeout: 20) { $0.peerName == "mallory" && $0.reason.contains("index entries") }
        while case let .indexAck(_, sequence)? = try? rogue.next(within: 1, where: {
            if case .indexAck = $0 { true } else { false }
        }) { acked = max(acked, sequence) }
        let after = try ProcessFigures(pid: bob.pid)
        ProcessFigures.report("10,000 tombstones from one member (quota \(allowance + 2))", before, after)
        #expect(acked <= UInt64(allowance + 2), "the daemon stored \(acked) entries from the member")
        #expect(refusal.reason.contains("mallory"), "\(refusal)")
        let folders = try #require(try controlRequest(bob, #"{"id":1,"op":"folders"}"#, within: 5))
        #expect(folders.contains("mallory") && folders.contains("index entries"), "status does not say why: \(folders)")
        #expect(after.peakMiB - before.rssMiB < 32)
    }

    // MARK: - A control client that stops reading

    @Test func stuckEventsReaderNeverStallsTheDaemon() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        // The real keepalive timers (2 s, 7 s): the test harness parses bob's 12 MB of JSON
        // events on stdout slowly, and the daemon writes them in order.
        let timers = ["SYNCPEER_KEEPALIVE_MS": "2000", "SYNCPEER_DEAD_PEER_MS": "7000"]
        let alice = try DaemonProcess(env, name: "alice", environment: timers)
        let bob = try DaemonProcess(env, name: "bob", environment: timers)
        _ = try env.pair(alice, bob)
        try bob.waitForState("connected", peer: "alice")
        let before = try ProcessFigures(pid: bob.pid)

        // A client subscribes to bob's events and never reads them.
        let stuck = try UnixConnection.connect(path: bob.home + "/control.sock")
        defer { stuck.close() }
        try stuck.write(Array(#"{"id":1,"op":"events"}"#.utf8) + [0x0A])
        Thread.sleep(forTimeInterval: 0.3)
        let skip = bob.events.count

        // Alice sends 200 messages of 60 kB: 12 MB of events for the stuck client.
        let control = try UnixConnection.connect(path: alice.home + "/control.sock")
        defer { control.close() }
        let text = String(repeating: "x", count: 60_000)
        for n in 1...200 {
            try control.write(Array(#"{"id":\#(n),"op":"msg","peer":"bob","text":"\#(text)"}"#.utf8) + [0x0A])
        }
        var replies = LineReader(control)
        for _ in 1...200 { _ = try replies.readLine(deadline: .now + .seconds(20)) }

        // Bob still answers at once, and alice was never dropped.
        let status = try controlRequest(bob, #"{"id":2,"op":"status"}"#, within: 5)
        #expect(status?.contains("\"ok\":true") == true, "status did not answer: \(status ?? "nothing in 5 s")")
        try bob.waitFor("message", after: skip, timeout: 20) { $0.text?.count == 60_000 && $0.peerName == "alice" }
        Thread.sleep(forTimeInterval: 1)
        #expect(!bob.events.dropFirst(skip).contains {
            $0["event"] as? String == "state" && $0.peerName == "alice" && $0["state"] as? String == "notConnected"
        }, "bob dropped alice while a control client was stuck: \(alice.events("state").map(\.reason))")
        let after = try ProcessFigures.settle(pid: bob.pid, to: before, threads: 8, fds: 1)
        ProcessFigures.report("events client that never reads, 12 MB of events", before, after)
        #expect(after.fds <= before.fds + 1, "the stuck client was not disconnected: \(after)")
        #expect(after.peakMiB - before.rssMiB < 48)
    }
}
