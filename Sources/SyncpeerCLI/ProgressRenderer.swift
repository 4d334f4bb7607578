#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import Synchronization
internal import SyncEngine
internal import PeerFiles

/// Shows transfer events. On a terminal: one live line per transfer (name, percentage,
/// bytes, rate, ETA or what it waits for), redrawn in place, fitted to the terminal's
/// width, the status coloured unless NO_COLOR is set; a clock redraws it even when no
/// event comes (so a stall shows within 2 s). With --json: one NDJSON line per event.
/// Piped text: one plain line per change of state, never JSON.
final class ProgressRenderer: Sendable {
    let output: any OutputSink
    let live: Bool
    private let json: Bool
    private let colour: Bool
    private let state = Mutex(Screen())
    private let clockStart = ContinuousClock.now
    /// The clock (live only; set once in init: a dispatch source is not Sendable, so it lives
    /// behind a lock).
    private let ticker: Mutex<(any DispatchSourceTimer)?>

    /// What is on the screen (live) or was printed (piped), per transfer in order.
    struct Screen {
        var order: [String] = []
        var tracks: [String: TransferTrack] = [:]
        /// Lines drawn by the last redraw (live).
        var drawn = 0
        /// Piped text: the last state printed per transfer.
        var shownStates: [String: TransferState] = [:]
        var last: TransferInfo?
        var finished = false
    }

    init(output: any OutputSink, json: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.output = output
        self.live = output.isTerminal && !json
        self.json = json
        // https://no-color.org: any non-empty NO_COLOR turns colour off.
        self.colour = live && (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
        if live {
            let timer = DispatchSource.makeTimerSource(queue: .global())
            timer.schedule(deadline: .now() + .milliseconds(500), repeating: .milliseconds(500))
            ticker = Mutex(timer)
        } else {
            ticker = Mutex(nil)
        }
        // Inside the lock: the handler is set before the clock runs; nothing here calls out.
        ticker.withLock { ticker in
            ticker?.setEventHandler { [weak self] in self?.redraw() }
            ticker?.resume()
        }
    }

    deinit { ticker.withLock { $0 }?.cancel() }

    private var now: Double {
        let d = ContinuousClock.now - clockStart
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// The latest event of the transfer shown last (for what a command says at the end).
    var lastTransfer: TransferInfo? { state.withLock { $0.last } }

    /// " in 1.8 s (111.1 MB/s)": how long `transfer` moved bytes, and the rate of the bytes
    /// that moved then (its size when none were seen moving); "" when it was never shown.
    func timing(of transfer: TransferInfo) -> String {
        let now = self.now
        let figures: (seconds: Double, moved: Int64)? = state.withLock { screen in
            guard let key = transfer.transfer.map({ String($0.prefix(12)) }) ?? screen.order.last,
                  let track = screen.tracks[key] else { return nil }
            return (track.movingSeconds(at: now), track.movedBytes)
        }
        guard let figures else { return "" }
        let bytes = figures.moved > 0 ? figures.moved : transfer.total ?? 0
        return PlainText.format(" in %.1f s", figures.seconds) + " (\(Self.formatBytes(Int64(Double(bytes) / max(figures.seconds, 0.001))))/s)"
    }

    func show(_ event: NodeEvent) {
        if json {
            output.json(event)
            return
        }
        let now = self.now
        guard case let .transfer(transfer) = event else {
            guard let line = EventRenderer.line(event) else { return }
            if live { printAbove(line) } else { output.line(line) }
            return
        }
        let text: String? = state.withLock { screen in
            let key = Self.track(transfer, on: &screen, at: now)
            if live { return nil }
            guard screen.shownStates[key] != transfer.state else { return nil }
            screen.shownStates[key] = transfer.state
            return EventRenderer.transferLine(transfer)
        }
        if let text { output.line(text) }
        if live { redraw() }
    }

    /// Records `transfer` in its line's track (a new line for a new transfer); returns its key.
    private static func track(_ transfer: TransferInfo, on screen: inout Screen, at now: Double) -> String {
        let preparing = "preparing:" + transfer.name + ":" + (transfer.peer?.name ?? "")
        let key = transfer.transfer.map { String($0.prefix(12)) } ?? preparing
        // The preparing line of a send becomes the transfer's once it has an ID.
        if key != preparing, let index = screen.order.firstIndex(of: preparing) {
            screen.order[index] = key
            screen.tracks[key] = screen.tracks.removeValue(forKey: preparing)
        }
        if screen.tracks[key] == nil {
            screen.order.append(key)
            screen.tracks[key] = TransferTrack(transfer, at: now)
        } else {
            screen.tracks[key]!.update(transfer, at: now)
        }
        screen.last = transfer
        return key
    }

    /// Ends the live lines with the command's final answer drawn (the daemon's last event may
    /// be "finishing": the last frame says "done", or why not). Prints nothing else: the
    /// command says the outcome itself (in JSON too).
    func finish(with result: TransferInfo) {
        let now = self.now
        if live { state.withLock { screen in _ = Self.track(result, on: &screen, at: now) } }
        finish()
    }

    /// Redraws every transfer's line in place (live only).
    func redraw() {
        guard live else { return }
        let now = self.now
        let width = Self.terminalWidth()
        let text: String? = state.withLock { screen in
            guard !screen.finished, !screen.order.isEmpty else { return nil }
            let tracks = screen.order.compactMap { screen.tracks[$0] }
            // Lines for several peers (`--to` repeated) each name theirs.
            let named = Set(tracks.compactMap { $0.info.peer?.id }).count > 1
            let lines = tracks.map { track in
                let info = track.info
                let name = named ? "\(info.name) \(info.direction == .send ? "to" : "from") \(info.peer?.name ?? "?")" : info.name
                return ProgressLayout.line(name: NameDisplay.escaped(name), bytes: info.bytes ?? 0, total: info.total ?? 0,
                                           status: track.status(at: now), width: width, colour: colour).styled
            }
            var out = Self.moveToTop(screen.drawn)
            out += lines.map { "\u{1b}[2K" + $0 }.joined(separator: "\n")
            screen.drawn = lines.count
            return out
        }
        if let text { output.out(text) }
    }

    /// A line of another event above the transfer lines.
    private func printAbove(_ line: String) {
        let clear: String = state.withLock { screen in
            defer { screen.drawn = 0 }
            return Self.moveToTop(screen.drawn) + (screen.drawn > 0 ? "\u{1b}[J" : "")
        }
        output.out(clear + StandardOutput.shown(line) + "\n")
        redraw()
    }

    /// From the end of the last drawn line to the start of the first.
    private static func moveToTop(_ drawn: Int) -> String {
        guard drawn > 0 else { return "" }
        return "\r" + (drawn > 1 ? "\u{1b}[\(drawn - 1)A" : "")
    }

    /// Ends the live lines (the last frame stays on the screen).
    func finish() {
        ticker.withLock { $0 }?.cancel()
        guard live else { return }
        redraw()
        let drawn: Int = state.withLock { screen in
            screen.finished = true
            return screen.drawn
        }
        if drawn > 0 { output.out("\n") }
    }

    /// The terminal's width (TIOCGWINSZ on standard output), else $COLUMNS, else 80.
    static func terminalWidth() -> Int {
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let columns = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init), columns > 0 { return columns }
        return 80
    }

    static func formatBytes(_ bytes: Int64) -> String { ProgressLayout.formatBytes(bytes) }
    static func formatDuration(_ seconds: Double) -> String { ProgressLayout.formatDuration(seconds) }
    static func shorten(_ text: String, _ limit: Int) -> String { ProgressLayout.shorten(text, limit) }
}
