import Testing
@testable import SyncEngine

struct RateMeterTests {
    @Test func steadyRateConverges() {
        var meter = RateMeter()
        for second in 0...10 { meter.sample(time: Double(second), bytes: Int64(second) * 1_000_000) }
        #expect(abs(meter.bytesPerSecond - 1_000_000) < 1)
        #expect(abs((meter.eta(remaining: 5_000_000) ?? 0) - 5) < 0.01)
    }

    @Test func aStallShowsQuickly() {
        var meter = RateMeter()
        for second in 0...5 { meter.sample(time: Double(second), bytes: Int64(second) * 1_000_000) }
        for second in 6...10 { meter.sample(time: Double(second), bytes: 5_000_000) }
        #expect(meter.bytesPerSecond < 150_000)
    }

    @Test func unknownBeforeTwoSamples() {
        var meter = RateMeter()
        #expect(meter.eta(remaining: 10) == nil)
        meter.sample(time: 0, bytes: 0)
        #expect(meter.eta(remaining: 10) == nil)
        #expect(meter.eta(remaining: 0) == 0)
    }

    /// A long gap between samples (a link cut, a slow disk) never gives a rate outside what
    /// was moved: never negative, never more than the bytes over the gap.
    @Test(arguments: [3.0, 10.0, 20.0, 60.0, 600.0])
    func aLongGapKeepsTheRateSane(gap: Double) {
        var meter = RateMeter()
        for second in 0...3 { meter.sample(time: Double(second), bytes: Int64(second) * 1_000_000) }
        meter.sample(time: 3 + gap, bytes: 3_500_000)
        #expect(meter.bytesPerSecond >= 0)
        #expect(meter.bytesPerSecond <= 1_000_000)
    }
}
