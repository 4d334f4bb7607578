internal import FoundationEssentials
internal import SyncEngine

/// `select --wait`: follows the fetch a selection started until everything selected is
/// here, asking the daemon what is still to fetch (`select DIR` without PATHs) once a
/// second: a live line on a terminal's stderr, or with --json each result that changed as
/// one line (the last with `neededFiles` 0). A fetch that moves nothing for `stallSeconds`
/// (no member holds the rest, or none is connected) stops it with the state exit code; the
/// daemon goes on fetching. Ctrl-C stops following, not the fetch.
struct SelectionFollow {
    let context: CommandContext
    let directory: String
    let first: SelectionResult
    /// How long (seconds) nothing may move before following stops.
    static let stallSeconds = 30

    func run() async throws(CLIError) -> Int32 {
        let live = context.output.isTerminal && !context.globals.json
        let interrupt = InterruptWatch {}
        defer { interrupt.stop() }
        var last = first
        var moved = ContinuousClock.now
        while last.neededFiles > 0 {
            if interrupt.interrupted {
                if live { context.output.err("\r\u{1B}[K") }
                context.output.err("Stopped following; the fetch goes on: " + SelectCommand.needText(last) + " to fetch\n")
                return ExitCode.interrupted
            }
            guard ContinuousClock.now - moved < .seconds(Self.stallSeconds) else {
                if live { context.output.err("\r\u{1B}[K") }
                context.output.err("Nothing arrived for \(Self.stallSeconds) s: \(SelectCommand.needText(last)) still to fetch; see 'syncpeer status'\n")
                return ExitCode.state
            }
            try? await Task.sleep(for: .seconds(1))
            let now = try context.call(.select(directory: directory, paths: nil), as: SelectionResult.self)
            let changed = (now.neededFiles, now.neededBytes, now.receivedBytes) != (last.neededFiles, last.neededBytes, last.receivedBytes)
            if changed { moved = ContinuousClock.now }
            if context.globals.json {
                if changed { context.output.json(now) }
            } else if live {
                let fetched = ProgressRenderer.formatBytes(max(0, now.receivedBytes - first.receivedBytes))
                context.output.err("\r\u{1B}[KFetching: \(SelectCommand.needText(now)) left, \(fetched) fetched")
            }
            last = now
        }
        if live { context.output.err("\r\u{1B}[K") }
        if !context.globals.json { context.output.line("Everything selected is here.") }
        return ExitCode.success
    }
}
