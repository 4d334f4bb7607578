#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import FoundationEssentials
internal import SyncEngine
internal import Synchronization

/// Where commands write. The real one writes to stdout/stderr; tests capture.
package protocol OutputSink: Sendable {
    /// Writes text to standard output (the caller adds newlines).
    func out(_ text: String)
    /// Writes text to standard error.
    func err(_ text: String)
    /// True when standard output is a terminal (live progress bars instead of NDJSON).
    var isTerminal: Bool { get }
}

extension OutputSink {
    /// One line to standard output: the one place human output is written, so names in it
    /// are shown with their hidden characters escaped (`NameDisplay`; JSON keeps them).
    func line(_ text: String) { out(Self.shown(text) + "\n") }

    /// `text` with each of its lines escaped for a person (`NameDisplay.escaped`).
    static func shown(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { NameDisplay.escaped(String($0)) }
            .joined(separator: "\n")
    }

    /// One JSON object (sorted keys) followed by a newline.
    func json(_ value: some Encodable) {
        if let line = Self.jsonLine(value) { out(line) }
    }

    /// One JSON object on standard error (errors under `--json`).
    func errJSON(_ value: some Encodable) {
        if let line = Self.jsonLine(value) { err(line) }
    }

    static func jsonLine(_ value: some Encodable) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return nil }
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}

/// The process's standard output and error, written with `write(2)` so nothing sits in a
/// buffer when the process is killed.
package struct StandardOutput: OutputSink {
    package init() {}
    package var isTerminal: Bool { isatty(1) == 1 }
    package func out(_ text: String) { Self.write(text, to: 1) }
    package func err(_ text: String) { Self.write(text, to: 2) }

    static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
        bytes.removeAll()
    }
}

/// Captures output in memory (for tests of commands and of the parser).
package final class CapturedOutput: OutputSink {
    private let state = Mutex<(out: String, err: String)>(("", ""))
    package init() {}
    package var isTerminal: Bool { false }
    package func out(_ text: String) { state.withLock { $0.out += text } }
    package func err(_ text: String) { state.withLock { $0.err += text } }
    package var standardOutput: String { state.withLock { $0.out } }
    package var standardError: String { state.withLock { $0.err } }
}
