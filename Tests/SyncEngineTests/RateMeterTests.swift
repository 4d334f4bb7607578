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

/// The sliding window as the progress line uses it: bytes actually moved, at the display's clock.
struct RateWindowTests {
    /// (seconds, bytes) samples, then the time asked, the rate expected (nil: unknown) and
    /// whether it counts as stalled.
    struct Case: Sendable, CustomTestStringConvertible {
        let samples: [(Double, Int64)]
        let now: Double
        let expected: Double?
        let stalled: Bool
        let what: String
        var testDescription: String { what }
    }

    static let cases: [Case] = [
        Case(samples: [(0, 0), (1, 1_000_000), (2, 2_000_000), (3, 3_000_000)], now: 3, expected: 1_000_000, stalled: false,
             what: "steady 1 MB/s: 1 MB/s, not stalled"),
        Case(samples: [(0, 0), (1, 1_000_000), (2, 2_000_000)], now: 4, expected: 0, stalled: true,
             what: "no sample for 2 s while the clock runs: stalled, rate 0 (not the last rate)"),
        Case(samples: [(0, 0), (1, 1_000_000), (2, 2_000_000)], now: 3.9, expected: 2_000_000 / 3.9, stalled: false,
             what: "1.9 s without a byte: not stalled yet; the rate falls as the window ages"),
        Case(samples: [(0, 0), (1, 50_000_000), (2, 50_100_000), (3, 50_200_000), (4, 50_300_000), (5, 50_400_000),
                       (6, 50_500_000), (7, 50_600_000)], now: 7, expected: 100_000, stalled: false,
             what: "only the last 5 s count: a fast start does not hold the rate up"),
        Case(samples: [(0, 0), (0.2, 5_000_000)], now: 0.3, expected: nil, stalled: false,
             what: "less than half a second of samples: unknown"),
    ]

    @Test(arguments: cases)
    func rates(_ c: Case) {
        var meter = RateMeter()
        for (time, bytes) in c.samples { meter.sample(time: time, bytes: bytes) }
        let rate = meter.rate(at: c.now)
        if let expected = c.expected {
            #expect(rate.map { abs($0 - expected) < 1 } == true, "rate \(String(describing: rate)), expected \(expected)")
        } else {
            #expect(rate == nil)
        }
        #expect(meter.isStalled(at: c.now) == c.stalled)
        if c.stalled { #expect(meter.eta(remaining: 1_000, at: c.now) == nil) }
    }

    /// A resumed transfer jumps to what the receiver holds: after `restart` that is no
    /// move, so the rate is never "36 TB/s".
    @Test func aRestartIsNoMove() {
        var meter = RateMeter()
        meter.sample(time: 0, bytes: 0)
        meter.sample(time: 1, bytes: 1_000_000)
        meter.restart(time: 10, bytes: 40_000_000_000)
        meter.sample(time: 10.5, bytes: 40_000_500_000)
        meter.sample(time: 11, bytes: 40_001_000_000)
        #expect(abs((meter.rate(at: 11) ?? 0) - 1_000_000) < 1)
    }

    /// A count that goes down (a new attempt from less) restarts the window, never a negative rate.
    @Test func aCountGoingDownRestarts() {
        var meter = RateMeter()
        meter.sample(time: 0, bytes: 5_000_000)
        meter.sample(time: 1, bytes: 6_000_000)
        meter.sample(time: 2, bytes: 1_000_000)
        meter.sample(time: 3, bytes: 2_000_000)
        #expect(abs((meter.rate(at: 3) ?? -1) - 1_000_000) < 1)
    }
}
