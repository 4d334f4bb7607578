@testable import SyncEngine
import Testing

/// The room a count of a peer's stored index rows leaves is spent page by page without
/// counting again, and never lets more rows in than the quota allows.
@Suite struct QuotaHeadroomTests {
    @Test func pagesAreAdmittedWithoutCountingUntilTheRoomIsSpent() {
        var room = QuotaHeadroom()
        let taken8 = room.take(1, key: "f|peer")
        #expect(!taken8, "nothing counted yet: the first page is counted")
        room.counted(key: "f|peer", stored: 1_000, quota: 2_500, cap: 10_000)
        let taken11 = room.take(500, key: "f|peer")
        #expect(taken11)
        let taken13 = room.take(500, key: "f|peer")
        #expect(taken13)
        let taken15 = room.take(500, key: "f|peer")
        #expect(taken15)
        let taken17 = room.take(1, key: "f|peer")
        #expect(!taken17, "1,000 + 1,500 rows at most: the quota is full, the next page is counted")
        let taken19 = room.take(1, key: "g|peer")
        #expect(!taken19, "another folder has its own count")
    }

    @Test func theRoomIsCappedAndNeverNegative() {
        var room = QuotaHeadroom()
        room.counted(key: "f|peer", stored: 0, quota: 1_000_000, cap: 2_000)
        let taken26 = room.take(2_000, key: "f|peer")
        #expect(taken26)
        let taken28 = room.take(1, key: "f|peer")
        #expect(!taken28, "past the cap the quota is read again")
        room.counted(key: "f|peer", stored: 900, quota: 800, cap: 2_000)
        let taken31 = room.take(1, key: "f|peer")
        #expect(!taken31)
        let taken33 = room.take(0, key: "f|peer")
        #expect(taken33)
    }

    /// Whatever pages come, the rows they can have added since the count stay within the quota.
    @Test func admittedPagesNeverPassTheQuota() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var room = QuotaHeadroom()
            let quota = Int.random(in: 0...5_000, using: &generator)
            let stored = Int.random(in: 0...quota, using: &generator)
            room.counted(key: "f|p", stored: stored, quota: quota, cap: Int.random(in: 0...6_000, using: &generator))
            var rows = stored
            for _ in 0..<50 {
                let page = Int.random(in: 0...600, using: &generator)
                if room.take(page, key: "f|p") { rows += page }
            }
            #expect(rows <= quota)
        }
    }

    @Test func aClosedSessionForgetsItsDevicesRooms() {
        var room = QuotaHeadroom()
        room.counted(key: "f|alice", stored: 0, quota: 100, cap: 100)
        room.counted(key: "g|alice", stored: 0, quota: 100, cap: 100)
        room.counted(key: "f|bob", stored: 0, quota: 100, cap: 100)
        room.forget(device: "alice")
        let taken60 = room.take(1, key: "f|alice")
        #expect(!taken60)
        let taken62 = room.take(1, key: "g|alice")
        #expect(!taken62)
        let taken64 = room.take(1, key: "f|bob")
        #expect(taken64)
    }
}
