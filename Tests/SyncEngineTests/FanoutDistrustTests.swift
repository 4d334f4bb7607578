import Foundation
import PeerFiles
@testable import SyncEngine
import Synchronization
import Testing

/// Fan-out against a hostile member (review of issue 43.4): a member that says it holds every
/// chunk of the file we fetch (`chunkHave`, again and again) and gives none is asked for its
/// chunks until it first fails one, not for every chunk after. Before, a refused or
/// unanswered request left its announcement standing: with nothing asked of it, it was the
/// least loaded source and got the first request of nearly every chunk (each waiting up to
/// the block timeout when it answers nothing).
@Suite struct FanoutDistrustTests {
    @Test func aMemberThatAnnouncesEverythingAndGivesNothingIsNotAskedAgain() throws {
        let fixture = try FolderHostTests.Fixture()
        defer { fixture.cleanup() }
        let hostile = String(repeating: "H", count: 56)
        fixture.host.alsoConnected = [hostile]
        // 64 MiB of 64 KiB chunks on average (~1,000): several times what a pull keeps in flight.
        let content = try fixture.remoteHas("big.bin", size: 64 << 20, seed: 43)
        let manifest = try FileChunker.manifest(ofFileAt: fixture.host.remoteRoot + "/big.bin")
        let count = manifest.chunks.count
        let folder = fixture.start()
        defer { folder.stop() }
        // Once the pull is under way (its first chunks asked for), the hostile member says it
        // holds every chunk, every 5 ms, until the file is placed.
        let placed = Flag()
        let announcer = Thread {
            while fixture.host.requests.withLock({ $0 }) < count / 4 && !placed.value.load(ordering: .relaxed) { usleep(1_000) }
            let bitmap = [UInt8](repeating: 0xFF, count: (count + 7) / 8)
            while !placed.value.load(ordering: .relaxed) {
                folder.held.received(device: hostile, path: "big.bin", root: manifest.rootHash, count: UInt32(count), bitmap: bitmap)
                usleep(5_000)
            }
        }
        announcer.start()
        defer { placed.value.store(true, ordering: .relaxed) }
        try TransferPair.eventually("big.bin is placed", timeout: 120) { fixture.holds("big.bin", content) }
        placed.value.store(true, ordering: .relaxed)
        // The remote answered each chunk once (no local base: no deltas); the rest went to the hostile member.
        let toHostile = fixture.host.requests.withLock { $0 } - count
        print("aMemberThatAnnouncesEverythingAndGivesNothingIsNotAskedAgain: \(toHostile) of \(count) chunks asked of the hostile member")
        #expect(toHostile < count / 4, "\(toHostile) of \(count) chunks were asked of a member that refused every one")
    }

    private final class Flag: Sendable { let value = Atomic(false) }
}
