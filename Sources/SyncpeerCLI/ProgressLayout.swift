internal import FoundationEssentials
internal import PeerFiles
internal import SyncEngine

/// One transfer's line, fitted to the terminal's width: everything that fits, dropping the
/// bar first, then shortening and dropping the name, then the rate, so the line never wraps
/// (a wrapped line scrolls a new line per redraw). Pure, for the table tests.
struct ProgressLayout {
    struct Line: Equatable {
        /// The text without colour (its length is what fits).
        let plain: String
        /// The same with ANSI colour on the status word (when colour is on).
        let styled: String
    }

    let name: String
    let bytes: Int64
    let total: Int64
    let status: TransferTrack.Status

    static func line(name: String, bytes: Int64, total: Int64, status: TransferTrack.Status,
                     width: Int, colour: Bool) -> Line {
        ProgressLayout(name: name, bytes: bytes, total: total, status: status).fit(width: width, colour: colour)
    }

    var fraction: Double { total > 0 ? min(1, Double(bytes) / Double(total)) : (status == .done ? 1 : 0) }

    var percent: String { "\(Int((fraction * 100).rounded(.down)))%" }

    /// "13.9/62.9 MB"; done: "62.9 MB".
    var amount: String {
        if status == .done { return Self.formatBytes(total) }
        return Self.formatPair(bytes, total)
    }

    /// The status words (nil: moving without a known rate).
    var tail: (text: String, colour: String?)? {
        switch status {
        case .preparing: return ("preparing", nil)
        case let .waiting(peer, offline): return (offline ? "waiting for \(peer)…" : "waiting for \(peer) to accept", "33")
        case let .moving(rate, eta):
            var parts: [String] = []
            if let rate, rate > 0 { parts.append(Self.formatBytes(Int64(rate)) + "/s") }
            if let eta, eta > 0, rate ?? 0 > 0 { parts.append("ETA " + Self.formatDuration(eta)) }
            return parts.isEmpty ? nil : (parts.joined(separator: " "), nil)
        case .stalled: return ("stalled", "33")
        case .reconnecting: return ("reconnecting…", "33")
        case .resuming: return ("resuming", "33")
        case let .paused(reason): return ("paused" + (reason.map { " (\($0))" } ?? ""), "33")
        case .finishing: return ("finishing", nil)
        case .done: return ("done", "32")
        case let .ended(state, reason): return (state.rawValue + (reason.map { " (\($0))" } ?? ""), "31")
        }
    }

    func fit(width: Int, colour: Bool) -> Line {
        // The last column is left free: writing into it makes some terminals wrap.
        let room = max(10, width - 1)
        let tail = self.tail
        let tailText = tail?.text ?? ""
        func assemble(name: String?, bar: Int?, rate: Bool) -> (String, String) {
            var head = ""
            if let name { head += name + "  " }
            head += percent
            if let bar {
                let filled = Int((fraction * Double(bar)).rounded(.down))
                head += " [" + String(repeating: "#", count: filled) + String(repeating: "-", count: bar - filled) + "]"
            }
            head += " " + amount
            guard rate, let tail else { return (head, head) }
            let styled = colour && tail.colour != nil ? "\u{1b}[\(tail.colour!)m\(tail.text)\u{1b}[0m" : tail.text
            return (head + " " + tail.text, head + " " + styled)
        }
        func line(_ pair: (String, String)) -> Line { Line(plain: pair.0, styled: pair.1) }
        if total <= 0, status != .done {
            // A live stream (`send -`): its size is known only at its end, so no percentage.
            let head = "\(Self.shorten(name, 28))  \(Self.formatBytes(bytes))"
            let styled = colour && tail?.colour != nil ? "\u{1b}[\(tail!.colour!)m\(tailText)\u{1b}[0m" : tailText
            let plain = Self.shorten(tailText.isEmpty ? head : head + " " + tailText, room)
            return Line(plain: plain, styled: plain.count < (head + " " + tailText).count || tailText.isEmpty ? plain : head + " " + styled)
        }
        // Name and bar: the bar takes what is left, 10 to 30 columns.
        let shortName = Self.shorten(name, 28)
        let barRoom = room - assemble(name: shortName, bar: 0, rate: true).0.count
        if barRoom >= 10 { return line(assemble(name: shortName, bar: min(30, barRoom), rate: true)) }
        // The name, shortened to what is left (at least 8 characters, or the whole name).
        let nameRoom = room - assemble(name: nil, bar: nil, rate: true).0.count - 2
        if nameRoom >= min(8, name.count) { return line(assemble(name: Self.shorten(name, nameRoom), bar: nil, rate: true)) }
        let bare = assemble(name: nil, bar: nil, rate: true)
        if bare.0.count <= room { return line(bare) }
        // The status alone after the percentage (a rate is the first thing to go).
        let short = assemble(name: nil, bar: nil, rate: false)
        if case .moving = status, short.0.count <= room { return line(short) }
        let minimal = percent + (tailText.isEmpty ? "" : " " + tailText)
        let cut = Self.shorten(minimal, room)
        return Line(plain: cut, styled: cut)
    }

    static func shorten(_ text: String, _ limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(max(0, limit - 1))) + "…"
    }

    /// Decimal units, as disks and networks count: 1.5 MB = 1,500,000 bytes.
    static func formatBytes(_ bytes: Int64) -> String {
        let (value, unit) = scaled(bytes)
        return unit == 0 ? "\(bytes) B" : PlainText.format("%.1f ", value) + units[unit]
    }

    /// "13.9/62.9 MB": both in the total's unit (the width stays the same as it grows).
    static func formatPair(_ done: Int64, _ total: Int64) -> String {
        let unit = scaled(max(total, done)).1
        if unit == 0 { return "\(done)/\(total) B" }
        var divisor = 1.0
        for _ in 0..<unit { divisor *= 1000 }
        return PlainText.format("%.1f/%.1f ", Double(done) / divisor, Double(total) / divisor) + units[unit]
    }

    static let units = ["B", "kB", "MB", "GB", "TB"]

    private static func scaled(_ bytes: Int64) -> (Double, Int) {
        var value = Double(bytes)
        var unit = 0
        while value >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return (value, unit)
    }

    static func formatDuration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        return s >= 3600 ? PlainText.format("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : PlainText.format("%d:%02d", s / 60, s % 60)
    }
}
