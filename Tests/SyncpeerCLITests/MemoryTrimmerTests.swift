import Foundation
import Testing
@testable import SyncpeerCLI

/// The daemon's memory trimmer: when it trims (its policy, alone), and what it reads.
struct MemoryTrimmerTests {
    typealias Policy = MemoryTrimmer.Policy
    let mib = 1 << 20
    let t0 = ContinuousClock.now

    /// Runs one check; the trim (if called) reports `leaves` bytes resident after it.
    func check(_ policy: inout Policy, _ resident: Int, at seconds: Double, leaves: Int? = nil) -> Bool {
        var called = false
        let trimmed = policy.check(resident: resident, now: t0 + .seconds(seconds)) {
            called = true
            return leaves ?? resident
        }
        #expect(trimmed == called)
        return trimmed
    }

    @Test func nothingIsTrimmedAtOrBelowTheThreshold() {
        var policy = Policy()
        #expect(!check(&policy, 40 * mib, at: 0))
        #expect(!check(&policy, Policy.threshold, at: 1))
        #expect(check(&policy, Policy.threshold + 1, at: 2))
    }

    @Test func afterATrimTheNextWaitsForGrowth() {
        var policy = Policy()
        // The trim leaves 90 MiB in use: trimming again at 91 MiB would only repeat it.
        #expect(check(&policy, 120 * mib, at: 0, leaves: 90 * mib))
        #expect(policy.floor == 90 * mib)
        #expect(!check(&policy, 91 * mib, at: 1))
        #expect(!check(&policy, 90 * mib + Policy.growth - 1, at: 2))
        #expect(check(&policy, 90 * mib + Policy.growth, at: 3))
    }

    @Test func memoryFreedWhenWorkEndsIsReturnedOnceItSettles() {
        var policy = Policy()
        // A scan of 100,000 files trimmed at its height; when it ends, what it freed stays
        // resident (194 MiB, 4 above what the trim left): no growth, but the next settle trims.
        #expect(check(&policy, 200 * mib, at: 0, leaves: 190 * mib))
        #expect(!check(&policy, 194 * mib, at: 1))
        #expect(!check(&policy, 194 * mib, at: 4.9))
        #expect(check(&policy, 194 * mib, at: 5, leaves: 80 * mib))
        // Below the threshold, nothing more however long it stays.
        #expect(!check(&policy, 80 * mib, at: 60))
    }

    /// Issue 43 (F): below the threshold, what a large piece of work left goes back once the
    /// daemon is idle (a second with under 5 % of a core), once; a busy daemon (a transfer's
    /// reused buffers) is never trimmed below the threshold, and nor is one whose CPU time
    /// is unknown.
    @Test func belowTheThresholdAnIdleDaemonIsTrimmedOnce() {
        func idleCheck(_ policy: inout Policy, _ resident: Int, at seconds: Double, cpu: Double, leaves: Int? = nil) -> Bool {
            var called = false
            let trimmed = policy.check(resident: resident, now: t0 + .seconds(seconds), cpu: .seconds(cpu)) {
                called = true
                return leaves ?? resident
            }
            #expect(trimmed == called)
            return trimmed
        }
        var policy = Policy()
        // A scan: busy (a whole core) at 79 MiB for 3 s, then idle.
        for step in 0...30 { #expect(!idleCheck(&policy, 79 * mib, at: Double(step) / 10, cpu: Double(step) / 10)) }
        #expect(!idleCheck(&policy, 79 * mib, at: 3.5, cpu: 3.01))
        #expect(idleCheck(&policy, 79 * mib, at: 4.1, cpu: 3.02, leaves: 50 * mib))
        // Idle on: not again, however long, until it grew `growth` above what the trim left.
        #expect(!idleCheck(&policy, 52 * mib, at: 60, cpu: 3.1))
        #expect(idleCheck(&policy, 50 * mib + Policy.growth, at: 61, cpu: 3.11))
        // Small, idle: never.
        var small = Policy()
        #expect(!idleCheck(&small, Policy.idleThreshold, at: 0, cpu: 0))
        #expect(!idleCheck(&small, Policy.idleThreshold, at: 5, cpu: 0))
        // A transfer at 75 MiB, busy throughout: never.
        var busy = Policy()
        for step in 0...100 { #expect(!idleCheck(&busy, 75 * mib, at: Double(step) / 10, cpu: Double(step) / 10 * 0.8)) }
        // CPU time unknown: the threshold rules alone.
        var unknown = Policy()
        #expect(!check(&unknown, 79 * mib, at: 0))
        #expect(!check(&unknown, 79 * mib, at: 10))
    }

    /// Issue 43.5: an idle daemon was checked ten times a second (its most frequent
    /// wakeup). Checks are `interval` apart while it works, `idleInterval` once it has been
    /// idle `idleGap`, and fast again from the first check that finds it busy.
    @Test func anIdleDaemonIsCheckedOnceASecond() {
        var policy = Policy()
        func pace(at seconds: Double, cpu: Double) -> Duration? {
            _ = policy.check(resident: 30 * mib, now: t0 + .seconds(seconds), cpu: .seconds(cpu)) { nil }
            return policy.newPace(now: t0 + .seconds(seconds))
        }
        // Working (half a core): fast, as from the start.
        for step in 0...10 { #expect(pace(at: Double(step) / 10, cpu: Double(step) / 20) == nil) }
        #expect(policy.pace == Policy.interval)
        // Idle (a hundredth of a core): slow once it has been for `idleGap`, not before.
        #expect(pace(at: 1.5, cpu: 0.505) == nil)
        #expect(pace(at: 2.1, cpu: 0.51) == Policy.idleInterval)
        #expect(pace(at: 3.1, cpu: 0.52) == nil)
        #expect(policy.pace == Policy.idleInterval)
        // Work again: fast at the next check.
        #expect(pace(at: 4.1, cpu: 1.0) == Policy.interval)
        // CPU time unknown: never idle, always fast.
        var unknown = Policy()
        _ = unknown.check(resident: 30 * mib, now: t0 + .seconds(10), cpu: nil) { nil }
        #expect(unknown.newPace(now: t0 + .seconds(10)) == nil && unknown.pace == Policy.interval)
    }

    @Test func theFloorFollowsTheSizeDown() {
        var policy = Policy()
        // A large apply, trimmed at 300 MiB with 290 in use; later the daemon is back at 70.
        #expect(check(&policy, 300 * mib, at: 0, leaves: 290 * mib))
        #expect(!check(&policy, 70 * mib, at: 1))
        #expect(policy.floor == 70 * mib)
        // A fragmentation spike to 160 MiB is trimmed, though it is below the 290 left before.
        #expect(check(&policy, 160 * mib, at: 2, leaves: 72 * mib))
    }

    @Test func atMostOneTrimPerGap() {
        var policy = Policy()
        #expect(check(&policy, 100 * mib, at: 0, leaves: 81 * mib))
        // Swings of more than `growth` right after: not before the gap has passed.
        let gap = Double(Policy.minimumGap.components.attoseconds) / 1e18 + Double(Policy.minimumGap.components.seconds)
        #expect(!check(&policy, 120 * mib, at: gap / 2))
        #expect(check(&policy, 120 * mib, at: gap))
    }

    @Test func theThresholdLeavesRoomBelowTheMemoryGoal() {
        // Peak RSS < 100 MiB is the goal; a 4 GiB transfer peaks at ~75 MiB and must not trim.
        #expect(Policy.threshold >= 76 * mib && Policy.threshold + Policy.growth < 100 * mib)
    }

    @Test func statmIsReadInPages() {
        #expect(MemoryTrimmer.residentBytes(statm: "52345 17803 2120 3517 0 29201 0\n", pageSize: 4096) == 17803 * 4096)
        #expect(MemoryTrimmer.residentBytes(statm: "52345 17803", pageSize: 65536) == 17803 * 65536)
        #expect(MemoryTrimmer.residentBytes(statm: "52345", pageSize: 4096) == nil)
        #expect(MemoryTrimmer.residentBytes(statm: "52345 x 1", pageSize: 4096) == nil)
        #expect(MemoryTrimmer.residentBytes(statm: "", pageSize: 4096) == nil)
    }

    @Test func theResidentSizeIsWhatTheKernelReports() throws {
        // VmRSS of /proc/self/status, read right after: the same figure, give or take what
        // other tests running at the same time allocate in between.
        let read = try #require(MemoryTrimmer.residentBytes())
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        let kib = try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
        #expect(read > 1 * mib)
        #expect(abs(read - kib * 1024) < 16 * mib)
    }
}
