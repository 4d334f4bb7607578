internal import FoundationEssentials
internal import SyncEngine

/// `restore`'s progress, from the daemon's `transfer` events: with `--json`, each event on
/// standard output (NDJSON, before the result); as text on a terminal, one live line on
/// standard error (bytes and files of the whole restore, the file being written), cleared
/// before the result; piped text shows only the result.
final class RestoreProgressLine {
    private let output: any OutputSink
    private let json: Bool
    private var drawn = false

    init(_ context: CommandContext) {
        output = context.output
        json = context.globals.json
    }

    func show(_ event: NodeEvent) {
        guard case let .transfer(info) = event else { return }
        if json {
            output.json(event)
            return
        }
        guard output.isTerminal, info.state == .active else { return }
        output.err("\r\u{1B}[K" + Self.line(info))
        drawn = true
    }

    /// "restoring project: 42%  2.1 MB of 5.0 MB, 3 files  …/project/sub/data.bin".
    static func line(_ info: TransferInfo) -> String {
        let (done, total) = (info.bytes ?? 0, info.total ?? 0)
        let percent = total > 0 ? Int(done * 100 / total) : 100
        var text = "restoring \(info.name): \(percent)%  \(ProgressRenderer.formatBytes(done)) of \(ProgressRenderer.formatBytes(total))"
        if let files = info.files { text += ", \(files) file(s)" }
        if let path = info.path { text += "  " + (path.count > 48 ? "…" + path.suffix(47) : path) }
        return text
    }

    /// Clears the live line (before the result is printed).
    func end() {
        if drawn { output.err("\r\u{1B}[K") }
        drawn = false
    }
}
