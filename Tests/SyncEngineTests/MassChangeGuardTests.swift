import PeerModel
import PeerIndex
import Testing
@testable import SyncEngine

/// The mass-change guard's threshold (MassChangeGuard): strictly more than the share or the
/// count holds a pull; bursts add up; a confirmation lets one through.
struct MassChangeGuardTests {
    /// (affected, files, percent, count limit, held?)
    static let thresholds: [(Int, Int, Int, Int, Bool)] = [
        (5, 10, 50, 1000, false), (6, 10, 50, 1000, true),          // 50 % of 10: at it, then above
        (50, 100, 50, 1000, false), (51, 100, 50, 1000, true),
        (1000, 10_000, 50, 1000, false), (1001, 10_000, 50, 1000, true), // the count limit
        (9, 9, 50, 1000, false),                                   // a folder under 10 files: no share limit
        (1001, 5, 50, 1000, true),                                 // … but the count still holds
        (0, 10, 50, 1000, false),
        (10, 10, 0, 1000, false), (1001, 2000, 0, 1000, true),     // 0 turns the share off
        (1500, 2000, 50, 0, true), (900, 2000, 50, 0, false),      // 0 turns the count off
        (3, 10, 20, 1000, true), (2, 10, 20, 1000, false),
        (10, 10, 100, 1000, false),
    ]

    @Test(arguments: thresholds.indices)
    func holdsStrictlyAboveItsLimits(_ n: Int) {
        let (affected, files, percent, count, held) = Self.thresholds[n]
        let limits = FolderGuardLimits(percent: percent, files: count)
        #expect(MassChangeGuard.crosses(affected: affected, files: files, limits: limits) == held)
        var guardian = MassChangeGuard(limits: limits)
        #expect((guardian.judge(affected: affected, files: files, nowNs: t0) != nil) == held)
    }

    /// Pulls of one burst add up against the folder before it; a pause starts over.
    @Test func aBurstAddsUpAcrossPulls() {
        var guardian = MassChangeGuard()
        #expect(guardian.judge(affected: 30, files: 100, nowNs: t0) == nil)
        #expect(guardian.judge(affected: 20, files: 70, nowNs: t0 + 1_000_000_000) == nil)
        #expect(guardian.judge(affected: 1, files: 50, nowNs: t0 + 2_000_000_000) == MassChangeGuard.Hold(affected: 51, files: 100))
        // Held: nothing counted; after a long pause the next pull is judged alone.
        var later = guardian
        #expect(later.judge(affected: 1, files: 50, nowNs: t0 + 2_000_000_000 + MassChangeGuard.burstGap + 1) == nil)
        // Confirmed: it goes through, and so does the rest of the burst (its later pages);
        // after a pause, a new change is judged again.
        #expect(guardian.judge(affected: 1, files: 50, nowNs: t0 + 3_000_000_000, confirmed: true) == nil)
        #expect(guardian.judge(affected: 49, files: 49, nowNs: t0 + 4_000_000_000) == nil)
        let quiet = t0 + 4_000_000_000 + MassChangeGuard.burstGap + 1
        #expect(guardian.judge(affected: 10, files: 20, nowNs: quiet) == nil)
        #expect(guardian.judge(affected: 1, files: 10, nowNs: quiet + 1) == MassChangeGuard.Hold(affected: 11, files: 20))
    }

    /// What counts: deletions and replacements of live local files, not their moves, conflict
    /// copies, metadata, directories or new paths.
    @Test func countsDeletionsAndReplacementsOfLiveFiles() {
        let local = file(vv([devA: 1]), content: 1)
        let newer = vv([devA: 1, devB: 1])
        let cases: [(SyncAction, FileEntry?, Bool)] = [
            (.delete(tombstone(newer, by: devB), from: devB), local, true),
            (.pull(file(newer, content: 2, by: devB), from: devB), local, true),
            (.pull(file(newer, content: 2, by: devB), from: devB), nil, false),
            (.pull(file(newer, content: 2, by: devB), from: devB), tombstone(vv([devA: 2])), false),
            (.updateMetadata(file(newer, content: 1, by: devB), from: devB), local, false),
            (.pull(file(newer, content: 1, by: devB), from: devB), local, false),
            (.delete(tombstone(newer, by: devB), from: devB), directory(vv([devA: 1])), false),
            (.keepLocal(local), local, false),
            (.conflict(winner: file(newer, content: 2, by: devB), from: devB, loser: local, loserCopyName: "x"), local, false),
        ]
        for (action, old, expected) in cases {
            #expect(MassChangeGuard.affected(action, local: old) == expected, "\(action)")
        }
    }
}
