import Foundation
import Testing
@testable import SyncpeerCLI

/// The daemon's memory trimmer: when it trims (pure rule), and what it reads.
struct MemoryTrimmerTests {
    let mib = 1 << 20

    @Test func nothingIsTrimmedAtOrBelowTheThreshold() {
        #expect(!MemoryTrimmer.shouldTrim(resident: 40 * mib, afterLastTrim: 0))
        #expect(!MemoryTrimmer.shouldTrim(resident: MemoryTrimmer.threshold, afterLastTrim: 0))
        #expect(MemoryTrimmer.shouldTrim(resident: MemoryTrimmer.threshold + 1, afterLastTrim: 0))
    }

    @Test func afterATrimTheNextWaitsForGrowth() {
        // The last trim left 90 MiB in use: trimming again at 91 MiB would only repeat it.
        let left = 90 * mib
        #expect(!MemoryTrimmer.shouldTrim(resident: left + 1 * mib, afterLastTrim: left))
        #expect(!MemoryTrimmer.shouldTrim(resident: left + MemoryTrimmer.growth - 1, afterLastTrim: left))
        #expect(MemoryTrimmer.shouldTrim(resident: left + MemoryTrimmer.growth, afterLastTrim: left))
        // A trim that got well below the threshold leaves the threshold as the bar.
        #expect(MemoryTrimmer.shouldTrim(resident: MemoryTrimmer.threshold + 1, afterLastTrim: 60 * mib))
    }

    @Test func theThresholdLeavesRoomBelowTheMemoryGoal() {
        // Peak RSS < 100 MiB is the goal; a 4 GiB transfer peaks at ~75 MiB and must not trim.
        #expect(MemoryTrimmer.threshold >= 76 * mib && MemoryTrimmer.threshold + MemoryTrimmer.growth < 100 * mib)
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
