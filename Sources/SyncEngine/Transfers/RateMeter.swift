/// Rate and time-to-go of a transfer from (time, bytes) samples: the bytes actually moved
/// over a sliding window of the last `span` seconds. A stall shows as a falling rate and,
/// after `stallAfter` seconds without a byte, as none at all; a jump that is not a move
/// (a resumed transfer learning what the receiver holds) is taken out with `restart`.
package struct RateMeter: Sendable {
    package let span: Double
    package let stallAfter: Double
    /// Samples within the window, oldest first (the oldest may be just outside it: the
    /// window's starting point).
    private var samples: [(time: Double, bytes: Int64)] = []
    /// When the byte count last changed.
    package private(set) var lastMove: Double?

    package init(span: Double = 5, stallAfter: Double = 2) {
        self.span = span
        self.stallAfter = stallAfter
    }

    /// Adds a sample: `bytes` done in all at `time` (seconds, monotonic). A count that goes
    /// down (a transfer restarted from less) restarts the window.
    package mutating func sample(time: Double, bytes: Int64) {
        if let last = samples.last {
            guard time >= last.time else { return }
            if bytes < last.bytes { restart(time: time, bytes: bytes); return }
            if bytes > last.bytes { lastMove = time }
        } else {
            lastMove = time
        }
        samples.append((time, bytes))
        // Keep one sample at or before the window's start, as its starting point.
        while samples.count > 2, samples[1].time <= time - span { samples.removeFirst() }
    }

    /// Forgets the past: `bytes` is where counting starts again (nothing moved yet).
    package mutating func restart(time: Double, bytes: Int64) {
        samples = [(time, bytes)]
        lastMove = time
    }

    /// Bytes per second over the window as it stands at `now`: nil until there is half a
    /// second of samples, 0 once nothing moved for `stallAfter` seconds.
    package func rate(at now: Double) -> Double? {
        guard let first = samples.first, let last = samples.last else { return nil }
        if isStalled(at: now) { return 0 }
        let from = samples.last { $0.time <= now - span } ?? first
        let elapsed = now - from.time
        guard elapsed >= 0.5 else { return nil }
        return max(0, Double(last.bytes - from.bytes) / elapsed)
    }

    /// Whether no byte moved for `stallAfter` seconds at `now`.
    package func isStalled(at now: Double) -> Bool {
        guard let lastMove else { return false }
        return now - lastMove >= stallAfter
    }

    /// The rate at the newest sample (what the engine reports with each event).
    package var bytesPerSecond: Double {
        guard let last = samples.last else { return 0 }
        return rate(at: last.time) ?? 0
    }

    /// Seconds to transfer `remaining` bytes at the rate at `now`; nil while unknown or stalled.
    package func eta(remaining: Int64, at now: Double) -> Double? {
        if remaining == 0 { return 0 }
        guard let rate = rate(at: now), rate > 1 else { return nil }
        return Double(remaining) / rate
    }

    /// The same at the newest sample.
    package func eta(remaining: Int64) -> Double? {
        guard let last = samples.last else { return remaining == 0 ? 0 : nil }
        return eta(remaining: remaining, at: last.time)
    }
}
