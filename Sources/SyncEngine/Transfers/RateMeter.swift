internal import Foundation

/// Rate and time-to-go of a transfer from (time, bytes) samples: an exponentially weighted
/// rate over the recent past, so a stall shows at once and a burst does not dominate.
public struct RateMeter: Sendable {
    /// Weight of the newest sample window (per second of elapsed time).
    let halfLife: Double
    private var lastTime: Double?
    private var lastBytes: Int64 = 0
    public private(set) var bytesPerSecond: Double = 0

    public init(halfLife: Double = 1.5) {
        self.halfLife = halfLife
    }

    /// Adds a sample: `bytes` done in all at `time` (seconds, monotonic).
    public mutating func sample(time: Double, bytes: Int64) {
        guard let last = lastTime else {
            lastTime = time
            lastBytes = bytes
            return
        }
        let elapsed = time - last
        guard elapsed > 0.05 else { return }
        let instant = Double(bytes - lastBytes) / elapsed
        let weight = 1 - pow2(-elapsed / halfLife)
        bytesPerSecond = bytesPerSecond == 0 ? instant : bytesPerSecond + weight * (instant - bytesPerSecond)
        lastTime = time
        lastBytes = bytes
    }

    /// Seconds to transfer `remaining` bytes at the current rate; nil while unknown.
    public func eta(remaining: Int64) -> Double? {
        guard bytesPerSecond > 1 else { return remaining == 0 ? 0 : nil }
        return Double(remaining) / bytesPerSecond
    }

    /// 2^x for the weights (x ≤ 0). A truncated series is not enough: after a long gap
    /// (x of -10 and below) it gave weights outside 0...1, and with them negative rates.
    private func pow2(_ x: Double) -> Double {
        Foundation.exp2(x)
    }
}
