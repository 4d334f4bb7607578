internal import Foundation
internal import SyncEngine

/// Shows transfer events: a live bar on a terminal (name, percentage, bytes, rate, ETA);
/// with --json one NDJSON line per event (the engine already limits them to about five a
/// second); otherwise (piped text) one plain line per change of state, never JSON.
final class ProgressRenderer: @unchecked Sendable {
    // @unchecked: called from one control-client thread at a time.
    let output: any OutputSink
    let live: Bool
    private var lastLineLength = 0
    private let json: Bool
    /// Piped text: the last state printed per transfer (progress alone prints nothing).
    private var shownStates: [String: TransferState] = [:]

    init(output: any OutputSink, json: Bool) {
        self.output = output
        self.live = output.isTerminal && !json
        self.json = json
    }

    func show(_ event: NodeEvent) {
        if json {
            output.json(event)
            return
        }
        guard live else {
            // Piped text: a line when something changes, not a line per progress step.
            guard case let .transfer(transfer) = event else {
                if let line = EventRenderer.line(event) { output.line(line) }
                return
            }
            let key = transfer.transfer ?? transfer.name
            guard shownStates[key] != transfer.state else { return }
            shownStates[key] = transfer.state
            output.line(EventRenderer.transferLine(transfer))
            return
        }
        guard case let .transfer(transfer) = event else {
            if let line = EventRenderer.line(event) { clear(); output.line(line) }
            return
        }
        let line = Self.bar(transfer, width: 24)
        let padding = lastLineLength > line.count ? String(repeating: " ", count: lastLineLength - line.count) : ""
        output.out("\r" + line + padding)
        lastLineLength = line.count
    }

    /// Ends the live line.
    func finish() {
        if live && lastLineLength > 0 { output.out("\n") }
        lastLineLength = 0
    }

    private func clear() {
        if lastLineLength > 0 { output.out("\r" + String(repeating: " ", count: lastLineLength) + "\r") }
        lastLineLength = 0
    }

    static func bar(_ event: TransferInfo, width: Int) -> String {
        let name = event.name
        let bytes = event.bytes ?? 0
        let total = event.total ?? 0
        let fraction = total > 0 ? Double(bytes) / Double(total) : 1
        let filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: max(0, width - filled))
        let percent = String(format: "%3.0f%%", fraction * 100)
        var line = "\(shorten(name, 28))  \(percent) [\(bar)] \(formatBytes(bytes))/\(formatBytes(total))"
        if let rate = event.rate, rate > 0 { line += "  \(formatBytes(Int64(rate)))/s" }
        if let eta = event.eta, eta > 0 { line += "  ETA \(formatDuration(eta))" }
        if event.state != .active { line += "  \(event.state.rawValue)" }
        return line
    }

    static func shorten(_ text: String, _ limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
    }

    /// Decimal units, as disks and networks count: 1.5 MB = 1,500,000 bytes.
    static func formatBytes(_ bytes: Int64) -> String {
        let units = ["B", "kB", "MB", "GB", "TB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func formatDuration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}
