internal import FoundationEssentials
internal import Synchronization
internal import SyncEngine
internal import Wormhole

/// The progress of a wormhole transfer. As text: a live line on standard error (name,
/// percentage, bytes and rate, redrawn at most 5 times a second on a terminal; piped, only
/// the notes and the summary). With `--json`: `transfer` events on standard output (no ID and
/// no peer: the other end is whoever holds the code), at most 5 a second, then the final one.
final class WormholeProgressLine: Sendable {
    private let output: any OutputSink
    private let json: Bool
    private let direction: TransferInfo.Direction
    private let started = ContinuousClock.now
    private struct Shown {
        var name: String
        var lastDraw: ContinuousClock.Instant?
        var meter = RateMeter()
        var done: Int64 = 0
        var total: Int64 = 0
        /// Bytes the receiver held already from a cut transfer (`resume-v1`).
        var resumed: Int64?
    }
    private let shown: Mutex<Shown>

    init(_ context: CommandContext, direction: TransferInfo.Direction, name: String) {
        output = context.output
        json = context.globals.json
        self.direction = direction
        shown = Mutex(Shown(name: name))
    }

    /// The name the events carry, once known (a receiver learns it from the offer).
    func named(_ name: String) { shown.withLock { $0.name = name } }

    var report: WormholeTransferReport {
        WormholeTransferReport(progress: { [self] done, total in draw(done, total) },
                               note: { [output, json] in if !json { output.err($0 + "\n") } },
                               resumed: { [self] held in shown.withLock { $0.resumed = held } })
    }

    private var seconds: Double {
        let elapsed = ContinuousClock.now - started
        return max(0.001, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    private func draw(_ done: Int64, _ total: Int64) {
        guard output.isTerminal || json else { return }
        let now = ContinuousClock.now
        let seconds = self.seconds
        let event: TransferInfo? = shown.withLock { shown in
            shown.meter.sample(time: seconds, bytes: done)
            (shown.done, shown.total) = (done, total)
            if let last = shown.lastDraw, now - last < .milliseconds(200), done < total { return nil }
            shown.lastDraw = now
            return .unrecorded(direction: direction, name: shown.name, state: .active, bytes: done, total: total,
                               rate: shown.meter.rate(at: seconds), eta: shown.meter.eta(remaining: total - done, at: seconds))
        }
        guard let event else { return }
        if json {
            output.json(NodeEvent.transfer(event))
            return
        }
        let percent = total > 0 ? Int(done * 100 / total) : 100
        output.err("\r\u{1B}[K\(percent)%  \(ProgressRenderer.formatBytes(done)) of \(ProgressRenderer.formatBytes(total))  \(ProgressRenderer.formatBytes(Int64(Double(done) / seconds)))/s")
    }

    /// The end: the summary line, or the `completed` event (with where the receiver put it).
    func finish(_ summary: String, path: String? = nil) {
        if json {
            let event: TransferInfo = shown.withLock { shown in
                .unrecorded(direction: direction, name: shown.name, state: .completed, bytes: shown.done, total: shown.total,
                            eta: 0, path: path, resumed: shown.resumed)
            }
            output.json(NodeEvent.transfer(event))
            return
        }
        if output.isTerminal { output.err("\r\u{1B}[K") }
        let resumed = shown.withLock { $0.resumed }
        output.err(summary + (resumed.map { " (resumed: \(ProgressRenderer.formatBytes($0)) were there already)" } ?? "") + "\n")
    }
}
