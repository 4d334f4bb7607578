import PeerFiles
import Testing
@testable import SyncEngine

/// A peer's move is not a mass deletion, even when its two halves (the new path, the
/// deletion of the old one) reach us in separate pulls of one burst (MassChangeGuard+Moves):
/// the peer's scanner records what it found before what vanished, so under load its index
/// update can carry the new paths before the deletions. Real deletions still add up.
struct MassChangeMoveTests {
    /// A folder of 10 live files, content n at "f<n>", as `pull` plans against.
    static let local: [PathKey: FileState] = Dictionary(uniqueKeysWithValues: (1...10).map { n in
        (PathKey("f\(n)"), file("f\(n)", vv([devA: 1]), content: UInt8(n)))
    })
    static let gone = vv([devA: 1, devB: 1])

    /// Pulls of `moved` (content n at a new path "moved/f<n>"), planned against `local`.
    static func placing(_ moved: [Int]) -> MassChangeGuard.Change {
        MassChangeGuard.Change(moved.map { n in .pull(file("moved/f\(n)", gone, content: UInt8(n), by: devB), from: devB) }, local: local)
    }

    /// Deletions of "f<n>" for each of `deleted`, planned against `local`.
    static func deleting(_ deleted: [Int]) -> MassChangeGuard.Change {
        MassChangeGuard.Change(deleted.map { n in .delete(tombstone("f\(n)", gone, by: devB), from: devB) }, local: local)
    }

    /// The E2E case (SelectiveSyncBoundaryTests) as carol saw it under load: in a folder of 6
    /// files alice moved 4 and deleted 2; the 4 new paths came in one pull (10 files then),
    /// the 6 deletions in the next. Before: "peers' changes would delete or replace 6 of 10
    /// files", held.
    @Test func newPathsThenTheirDeletionsAreMovesNotAMassDeletion() {
        var guardian = MassChangeGuard()
        #expect(Self.placing([1, 2, 3, 4]).affected == 0)
        #expect(guardian.judge(Self.placing([1, 2, 3, 4]), files: 6, nowNs: t0) == nil)
        let deletions = Self.deleting([1, 2, 3, 4, 5, 6])
        #expect(deletions.affected == 6)
        #expect(guardian.judge(deletions, files: 10, nowNs: t0 + 1_000_000_000) == nil)
        #expect(guardian.burstAffected == 2, "only the two real deletions count")
    }

    /// Issue 43 (F): an idle folder does not keep its last burst's tallies until its next
    /// pull: the periodic tick's `expire` forgets them once the burst's gap has passed (and
    /// not before: a move's second half may still come).
    @Test func anIdleFolderForgetsItsLastBurstsTallies() {
        var guardian = MassChangeGuard()
        #expect(guardian.judge(Self.placing([1, 2, 3]), files: 10, nowNs: t0) == nil)
        #expect(guardian.judge(Self.deleting([7, 8]), files: 13, nowNs: t0 + 1) == nil)
        #expect(guardian.burstPlaced.count == 3 && guardian.burstDeleted.count == 2 && guardian.burstAffected == 2)
        guardian.expire(nowNs: t0 + MassChangeGuard.burstGap)
        #expect(guardian.burstPlaced.count == 3 && guardian.burstDeleted.count == 2 && guardian.burstAffected == 2)
        guardian.expire(nowNs: t0 + MassChangeGuard.burstGap + 2)
        #expect(guardian.burstPlaced.count == 0 && guardian.burstDeleted.count == 0 && guardian.burstAffected == 0)
    }

    /// The other order: the deletions first (under the limit, applied), their new paths in a
    /// later pull take them back, so the burst's real deletions are judged alone.
    @Test func deletionsThenTheirNewPathsAreTakenBack() {
        var guardian = MassChangeGuard()
        #expect(guardian.judge(Self.deleting([1, 2, 3]), files: 10, nowNs: t0) == nil)
        #expect(guardian.burstAffected == 3)
        #expect(guardian.judge(Self.placing([1, 2, 3]), files: 7, nowNs: t0 + 1_000_000_000) == nil)
        #expect(guardian.burstAffected == 0)
        #expect(guardian.judge(Self.deleting([4, 5, 6, 7, 8]), files: 10, nowNs: t0 + 2_000_000_000) == nil)
        #expect(guardian.judge(Self.deleting([9]), files: 5, nowNs: t0 + 3_000_000_000)
            == MassChangeGuard.Hold(affected: 6, files: 10))
    }

    /// Real deletions still hold: a copy the burst did not place does not hide a deletion,
    /// one placement pairs one deletion, a pause forgets placements, and a held pull places
    /// nothing.
    @Test func realDeletionsStillHold() {
        // Five pairs of twins already here: deleting six of them is a mass deletion.
        let twins = Dictionary(uniqueKeysWithValues: (1...10).map { n in
            (PathKey("t\(n)"), file("t\(n)", vv([devA: 1]), content: UInt8((n + 1) / 2)))
        })
        let sixTwins = MassChangeGuard.Change((1...6).map { n in .delete(tombstone("t\(n)", Self.gone, by: devB), from: devB) }, local: twins)
        var guardian = MassChangeGuard()
        #expect(guardian.judge(sixTwins, files: 10, nowNs: t0) == MassChangeGuard.Hold(affected: 6, files: 10))

        // One copy of content 1 placed; seven files of content 1 deleted: six count.
        let sameContent = Dictionary(uniqueKeysWithValues: (1...10).map { n in (PathKey("s\(n)"), file("s\(n)", vv([devA: 1]), content: 1)) })
        let sevenCopies = MassChangeGuard.Change((1...7).map { n in .delete(tombstone("s\(n)", Self.gone, by: devB), from: devB) }, local: sameContent)
        guardian = MassChangeGuard()
        #expect(guardian.judge(Self.placing([1]), files: 10, nowNs: t0) == nil)
        #expect(guardian.judge(sevenCopies, files: 11, nowNs: t0 + 1) == MassChangeGuard.Hold(affected: 6, files: 11))

        // Content placed and then deleted at the same path is no move: it counts.
        guardian = MassChangeGuard()
        let placedHere = Self.local.merging([(PathKey("moved/f1"), file("moved/f1", Self.gone, content: 1, by: devB))]) { a, _ in a }
        let deletedThere = MassChangeGuard.Change([.delete(tombstone("moved/f1", vv([devA: 1, devB: 2]), by: devB), from: devB)], local: placedHere)
        #expect(guardian.judge(Self.placing([1]), files: 10, nowNs: t0) == nil)
        #expect(guardian.judge(deletedThere, files: 11, nowNs: t0 + 1) == nil)
        #expect(guardian.burstAffected == 1)

        // Twins placed by the burst, then both deleted: the second deletion counts (its
        // twin, the first's move target, is gone too).
        guardian = MassChangeGuard()
        let twinsPlaced = [PathKey("x1"), PathKey("x2")].map { MassChangeGuard.Change([.pull(file($0.string, Self.gone, content: 42, by: devB), from: devB)], local: [:]) }
        let twinsHere = Dictionary(uniqueKeysWithValues: ["x1", "x2"].map { (PathKey($0), file($0, Self.gone, content: 42, by: devB)) })
        #expect(guardian.judge(twinsPlaced[0], files: 10, nowNs: t0) == nil && guardian.judge(twinsPlaced[1], files: 11, nowNs: t0) == nil)
        for (n, twin) in ["x1", "x2"].enumerated() {
            let deletion = MassChangeGuard.Change([.delete(tombstone(twin, vv([devA: 1, devB: 2]), by: devB), from: devB)], local: twinsHere)
            #expect(guardian.judge(deletion, files: 12 - n, nowNs: t0 + 1) == nil)
        }
        #expect(guardian.burstAffected == 1)

        // What a burst remembers is bounded: 100 copies of one content placed, 100 files of
        // it deleted: past `trackedPerContent`, deletions count.
        guardian = MassChangeGuard()
        let copies = MassChangeGuard.Change((1...100).map { n in .pull(file("copy\(n)", Self.gone, content: 7, by: devB), from: devB) }, local: [:])
        let originals = Dictionary(uniqueKeysWithValues: (1...100).map { n in (PathKey("o\(n)"), file("o\(n)", vv([devA: 1]), content: 7)) })
        let gone = MassChangeGuard.Change((1...100).map { n in .delete(tombstone("o\(n)", Self.gone, by: devB), from: devB) }, local: originals)
        #expect(guardian.judge(copies, files: 1000, nowNs: t0) == nil)
        #expect(guardian.judge(gone, files: 1100, nowNs: t0 + 1) == nil)
        #expect(guardian.burstAffected == 100 - MassChangeGuard.trackedPerContent)

        // Placed, then a pause longer than a burst: the deletions are a new change.
        guardian = MassChangeGuard()
        #expect(guardian.judge(Self.placing([1, 2, 3, 4]), files: 10, nowNs: t0) == nil)
        #expect(guardian.judge(Self.deleting([1, 2, 3, 4, 5, 6, 7, 8]), files: 14, nowNs: t0 + MassChangeGuard.burstGap + 1)
            == MassChangeGuard.Hold(affected: 8, files: 14))

        // A held pull's placements are not kept: it was not applied.
        guardian = MassChangeGuard()
        let heldMove = MassChangeGuard.Change((5...10).map { n in SyncAction.delete(tombstone("f\(n)", Self.gone, by: devB), from: devB) }
            + [.pull(file("moved/f1", Self.gone, content: 1, by: devB), from: devB)], local: Self.local)
        #expect(guardian.judge(heldMove, files: 10, nowNs: t0) == MassChangeGuard.Hold(affected: 6, files: 10))
        #expect(guardian.judge(Self.deleting([1]), files: 10, nowNs: t0 + 1) == nil)
        #expect(guardian.burstAffected == 1, "the held pull placed nothing")
    }
}
