import Testing
@testable import SyncEngine

/// Issue 41: each versions policy, as pure logic on a test clock.
struct VersionPolicyTests {
    static let s: Int64 = 1_000, minute = 60 * s, hour = 60 * minute, day = 24 * hour
    static let now: Int64 = 1_800_000_000_000

    /// Versions of one path kept `ages` ago, IDs from 1.
    static func kept(_ ages: [Int64], path: String = "a.txt") -> [VersionPolicy.Kept] {
        ages.enumerated().map { VersionPolicy.Kept(id: Int64($0.offset + 1), path: path, keptAt: now - $0.element) }
    }

    @Test func policiesReadAndWriteAsText() throws {
        for text in ["none", "trashcan 7", "simple 5", "staggered 30", "staggered 90 cap 20%", "simple 3 cap 1G", "simple 3 cap 1000", "none cap 3K"] {
            #expect(VersionPolicy(parsing: text)?.description == text, "\(text)")
        }
        #expect(VersionPolicy(parsing: "staggered")?.kind == .staggered(maxDays: 30))
        #expect(VersionPolicy(parsing: "simple 2 cap 5G")?.cap == .bytes(5 << 30))
        #expect(VersionPolicy.standard.description == "staggered 30 cap 10%")
        for bad in ["", "simple", "simple 0", "simple -1", "trashcan x", "staggered 1 2", "always", "simple 5 cap", "none cap 0%",
                    "none cap 101%", "simple 9999999"] {
            #expect(VersionPolicy(parsing: bad) == nil, "accepted '\(bad)'")
        }
        #expect(VersionPolicy.standard.capBytes(fileSystemBytes: 1_000_000) == 100_000)
    }

    @Test func noneKeepsNothingAndTrashcanKeepsDays() {
        let versions = Self.kept([1 * Self.minute, 2 * Self.day, 8 * Self.day])
        #expect(VersionPolicy(kind: .none).expired(versions, now: Self.now) == [1, 2, 3])
        #expect(VersionPolicy(kind: .trashcan(days: 7)).expired(versions, now: Self.now) == [3])
        #expect(VersionPolicy(kind: .trashcan(days: 1)).expired(versions, now: Self.now) == [2, 3])
    }

    @Test func simpleKeepsTheNewestNOfEachPath() {
        let a = Self.kept([5 * Self.minute, 1 * Self.minute, 3 * Self.minute, 9 * Self.minute])   // IDs 1…4
        let b = Self.kept([2 * Self.day], path: "b.txt").map { VersionPolicy.Kept(id: 10, path: $0.path, keptAt: $0.keptAt) }
        #expect(VersionPolicy(kind: .simple(count: 2)).expired(a + b, now: Self.now) == [1, 4])
        #expect(VersionPolicy(kind: .simple(count: 5)).expired(a + b, now: Self.now).isEmpty)
    }

    /// One per 30 s in the first hour, per hour for a day, per day for 30 days, per week up
    /// to the maximum age; older ones go.
    @Test func staggeredThinsOutWithAge() {
        let policy = VersionPolicy(kind: .staggered(maxDays: 60))
        // First hour: 10 s apart, only one per 30 s stays (the newest of each run).
        let recent = Self.kept([0, 10 * Self.s, 20 * Self.s, 30 * Self.s, 40 * Self.s, 65 * Self.s])
        #expect(policy.expired(recent, now: Self.now) == [2, 3, 5])
        // Within a day: 20 minutes apart, one per hour.
        let hours = Self.kept([2 * Self.hour, 2 * Self.hour + 20 * Self.minute, 2 * Self.hour + 40 * Self.minute, 3 * Self.hour + 10 * Self.minute])
        #expect(policy.expired(hours, now: Self.now) == [2, 3])
        // Within 30 days: one per day.
        let days = Self.kept([3 * Self.day, 3 * Self.day + 6 * Self.hour, 4 * Self.day + 1 * Self.hour])
        #expect(policy.expired(days, now: Self.now) == [2])
        // Past 30 days: one per week; past the maximum age: none.
        let weeks = Self.kept([31 * Self.day, 33 * Self.day, 39 * Self.day, 61 * Self.day])
        #expect(policy.expired(weeks, now: Self.now) == [2, 4])
        // Paths are thinned apart.
        let two = Self.kept([0], path: "x") + Self.kept([5 * Self.s], path: "y").map { VersionPolicy.Kept(id: 2, path: $0.path, keptAt: $0.keptAt) }
        #expect(policy.expired(two, now: Self.now).isEmpty)
    }

    /// The clock moves on: what staggered kept a minute apart in the first hour thins to one
    /// per hour a few hours later.
    @Test func staggeredOnAMovingClock() {
        let policy = VersionPolicy(kind: .staggered(maxDays: 30))
        let versions = (0..<60).map { VersionPolicy.Kept(id: Int64($0 + 1), path: "a", keptAt: Self.now - Int64($0) * Self.minute) }
        #expect(policy.expired(versions, now: Self.now).isEmpty)
        let later = policy.expired(versions, now: Self.now + 3 * Self.hour)
        #expect(versions.count - later.count == 1, "one per hour of an hour's versions: \(versions.count - later.count) kept")
        #expect(policy.expired(versions, now: Self.now + 31 * Self.day).count == 60)
    }
}
