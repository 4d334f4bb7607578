import Foundation
import PeerFiles
@testable import PeerNet
import PeerWire
import Testing

/// The figures of issue 44's floods at the review's scale (minutes, not seconds: run only
/// when asked, `SYNCPEER_FLOOD_FIGURES=1 swift test --filter FloodFiguresTests`): a paired
/// peer's offers, share offers and tombstones against a real daemon, its peak memory and
/// CPU time during and after each. Nothing is asserted here; `PeerHoldBoundsTests` asserts
/// the same bounds on floods scaled down to seconds.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["SYNCPEER_FLOOD_FIGURES"] != nil))
struct FloodFiguresTests {
    /// Runs `send` (a flood), waits until bob is idle (handled it all), then `settle` seconds;
    /// reports bob's figures.
    private func flood(_ bob: HostileBob, _ label: String, settle: Double = 2, _ send: () throws -> Void) throws {
        let before = try ProcessFigures(pid: bob.daemon.pid)
        let started = Date()
        try send()
        Self.waitUntilIdle(bob.daemon.pid)
        let during = try ProcessFigures(pid: bob.daemon.pid)
        print(String(format: "[figures] %@: sent and handled in %.1f s", label, Date().timeIntervalSince(started)))
        Thread.sleep(forTimeInterval: settle)
        ProcessFigures.report(label, before, try ProcessFigures(pid: bob.daemon.pid), during: during)
    }

    /// Waits until the process's CPU time stops growing (less than 0.05 s in a second).
    static func waitUntilIdle(_ pid: Int32) {
        var last = (try? ProcessFigures(pid: pid))?.cpuSeconds ?? 0
        while true {
            Thread.sleep(forTimeInterval: 1)
            guard let now = (try? ProcessFigures(pid: pid))?.cpuSeconds, now - last >= 0.05 else { return }
            last = now
        }
    }

    /// `count` offers like `offer` from a peer bob's user paired with; what stays pending,
    /// and bob's figures once the peer left.
    private func offerFlood(_ label: String, count: Int, _ offer: TransferOffer) throws {
        let bob = try HostileBob(autoAccept: false, environment: ResourceBoundsTests.patientEnvironment)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogueByUser(name: "offers")
        try flood(bob, label) {
            for _ in 0..<count { try rogue.send(.offer(TransferOffer(id: .random(), kind: offer.kind, name: offer.name, entries: offer.entries))) }
        }
        print("[figures] pending: \(try PeerHoldBoundsTests.pendingOffers(bob, from: "offers").count)")
        rogue.close()
        try bob.daemon.waitForState("notConnected", peer: "offers")
        Thread.sleep(forTimeInterval: 2)
        print("[figures] after the peer left: \(try ProcessFigures(pid: bob.daemon.pid))")
    }

    @Test func offersOfLargeManifests() throws {
        let template = try PeerHoldBoundsTests.offer(chunks: 349_000, name: "big.bin")
        try offerFlood("150 offers of 12 MiB manifests", count: 150, template)
    }

    @Test func offersOfManyFiles() throws {
        let file = try ForgedFile(chunkSizes: [1])
        let entries = (0..<100_000).map { file.entry(path: "d\($0 % 100)/f\($0)") }
        try offerFlood("30 offers of 100,000 files", count: 30, TransferOffer(id: .random(), kind: .folder, name: "many", entries: entries))
    }

    @Test func shareOffers() throws {
        let bob = try HostileBob(autoAccept: false, environment: ResourceBoundsTests.patientEnvironment)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogueByUser(name: "shares")
        try flood(bob, "3,500 share offers") {
            try rogue.send((0..<3_500).map { Frame.shareOffer(folder: "flood-\($0)", label: "flood-\($0)") })
        }
        let offers = (try bob.status()["offers"] as? [[String: Any]] ?? []).count
        print("[figures] share offers stored: \(offers)")
    }

    @Test func tombstones() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        // An allowance of 10,000: storing (and applying) tombstones within the quota is not
        // what is measured (200,000 took more than 6 CPU-minutes in a debug build).
        let (bob, rogue, folderID) = try RogueMember.joinedFolder(
            env, environment: ResourceBoundsTests.patientEnvironment.merging(["SYNCPEER_PEER_INDEX_ALLOWANCE": "10000"]) { $1 })
        defer { rogue.close() }
        func page(_ page: Int) -> Frame {
            let entries = (1...10_000).map { rogue.tombstone("gone-\(page * 10_000 + $0)", UInt64(page * 10_000 + $0)) }
            return .indexUpdate(folder: folderID, full: page == 0, entries: entries)
        }
        // 100 pages of 10,000: the first fills the quota (10,002), the 99 others are refused.
        let before = try ProcessFigures(pid: bob.pid)
        var started = Date()
        try rogue.channel.send(page(0))
        _ = try rogue.next(within: 60) { if case let .indexAck(_, sequence) = $0 { sequence == 10_000 } else { false } }
        FloodFiguresTests.waitUntilIdle(bob.pid)
        let stored = try ProcessFigures(pid: bob.pid)
        print(String(format: "[figures] 10,000 tombstones stored and applied in %.1f s", Date().timeIntervalSince(started)))
        ProcessFigures.report("10,000 tombstones stored (the quota)", before, stored)
        started = Date()
        let pages = (1..<100).map(page)
        let channel = rogue.channel
        let sent = DispatchSemaphore(value: 0)
        Thread {
            for frame in pages { guard (try? channel.send(frame)) != nil else { break } }
            sent.signal()
        }.start()
        sent.wait()
        Self.waitUntilIdle(bob.pid)
        print(String(format: "[figures] 990,000 more tombstones sent and handled in %.1f s (1 s idle included)", Date().timeIntervalSince(started)))
        ProcessFigures.report("990,000 tombstones past the quota", stored, try ProcessFigures(pid: bob.pid))
    }
}
