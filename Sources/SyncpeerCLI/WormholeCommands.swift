internal import Foundation
internal import Synchronization
internal import Wormhole

/// The servers `send --code` and `receive CODE` use: the public Magic Wormhole servers unless
/// `--mailbox` / `--transit-relay` say otherwise (contacted only by these commands).
struct WormholeServers: Sendable {
    static let publicMailbox = "ws://relay.magic-wormhole.io:4000/v1"
    static let publicTransitRelay = "transit.magic-wormhole.io:4001"
    let mailbox: String
    let transitRelay: String

    init(_ arguments: ParsedArguments) {
        mailbox = arguments.value("mailbox") ?? Self.publicMailbox
        transitRelay = arguments.value("transit-relay") ?? Self.publicTransitRelay
    }

    /// Wormhole transfers print text only, so far: `--json` is refused rather than ignored.
    static func refuseJSON(_ context: CommandContext) throws(CLIError) {
        if context.globals.json { throw .usage("--json is not supported with wormhole codes yet") }
    }

    /// The transit relay as a hint.
    func relays() throws(WormholeError) -> [TransitHints.Address] {
        guard let colon = transitRelay.lastIndex(of: ":"), let port = UInt16(transitRelay[transitRelay.index(after: colon)...]), port != 0 else {
            throw .transfer("--transit-relay \(transitRelay): expected HOST:PORT")
        }
        return [TransitHints.Address(host: String(transitRelay[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port: port)]
    }
}

extension CLIError {
    init(_ error: WormholeError) {
        switch error {
        case .invalidCode: self = .usage(error.description)
        default: self = .failure(error.description)
        }
    }
}

/// `syncpeer send --code`: a text (`--text`) or a file to whoever holds the code, with any
/// Magic Wormhole client on the other end.
struct WormholeSend: Sendable {
    enum What: Sendable {
        case text(String)
        case path(String)
    }

    let what: What
    let code: String?
    let servers: WormholeServers

    func run(_ context: CommandContext) throws(CLIError) -> Int32 {
        try WormholeServers.refuseJSON(context)
        let given: WormholeCode?
        do throws(WormholeError) { given = try code.map { c throws(WormholeError) in try WormholeCode(parsing: c) } } catch { throw CLIError(error) }
        let session: WormholeSession
        do {
            session = try WormholeSession.open(url: servers.mailbox, code: given) { code in
                context.output.err("Wormhole code is: \(code)\nOn the other computer, run one of:\n\n  syncpeer receive \(code)\n  wormhole receive \(code)\n\n")
            }
        } catch { throw CLIError(error) }
        // Ctrl-C: the other side is told ({"error": …}) and the connections close.
        let interrupt = InterruptWatch { session.abandon("the sender cancelled (Ctrl-C)") }
        defer { interrupt.stop() }
        do throws(WormholeError) {
            switch what {
            case let .text(text):
                try session.send(["offer": ["message": text]])
                let reply = try session.receive()
                guard let answer = reply["answer"] as? [String: Any], answer["message_ack"] as? String == "ok" else {
                    throw WormholeError.remote("the text was not acknowledged")
                }
                session.close()
                context.output.err("text message sent\n")
            case let .path(path):
                let line = WormholeProgressLine(output: context.output)
                try WormholeFileSender(session: session, path: path, relays: try servers.relays(), report: line.report).run()
                line.finish("Sent \((path as NSString).lastPathComponent)")
                session.close()
            }
            return ExitCode.success
        } catch {
            session.close(mood: "errory")
            return try WormholeInterrupted.check(interrupt, error, context)
        }
    }
}

/// The end of a wormhole command that failed: after Ctrl-C, "Cancelled" and exit 130.
enum WormholeInterrupted {
    static func check(_ interrupt: InterruptWatch, _ error: WormholeError, _ context: CommandContext) throws(CLIError) -> Int32 {
        guard interrupt.interrupted else { throw CLIError(error) }
        context.output.err("\nCancelled; the other side was told.\n")
        return ExitCode.interrupted
    }
}

/// `syncpeer receive CODE`: a text (printed to standard output) or a file into `--dir`.
struct WormholeReceive: Sendable {
    let code: String
    let directory: String?
    let servers: WormholeServers

    func run(_ context: CommandContext) throws(CLIError) -> Int32 {
        try WormholeServers.refuseJSON(context)
        let session: WormholeSession
        do throws(WormholeError) {
            session = try WormholeSession.open(url: servers.mailbox, code: try WormholeCode(parsing: code))
        } catch { throw CLIError(error) }
        let interrupt = InterruptWatch { session.abandon("the receiver cancelled (Ctrl-C)") }
        defer { interrupt.stop() }
        do throws(WormholeError) {
            var transit: [String: Any]?
            while true {
                let message = try session.receive()
                if let hints = message["transit"] as? [String: Any] { transit = hints }
                guard let offer = message["offer"] as? [String: Any] else { continue }
                if let text = offer["message"] as? String {
                    context.output.out(text + "\n")
                    try session.send(["answer": ["message_ack": "ok"]])
                    session.close()
                    return ExitCode.success
                }
                let target = directory ?? FileManager.default.currentDirectoryPath
                let line = WormholeProgressLine(output: context.output)
                let path = try WormholeFileReceiver(session: session, offer: offer, senderTransit: transit, directory: target,
                                                    relays: try servers.relays(), report: line.report).run()
                line.finish("Received → \(path)")
                session.close()
                return ExitCode.success
            }
        } catch {
            session.close(mood: "errory")
            return try WormholeInterrupted.check(interrupt, error, context)
        }
    }
}

/// The live line of a wormhole transfer on standard error: name, percentage, bytes and rate,
/// redrawn at most 5 times a second on a terminal; piped, only the notes and the summary.
final class WormholeProgressLine: Sendable {
    private let output: any OutputSink
    private let started = ContinuousClock.now
    private let lastDraw = Mutex<ContinuousClock.Instant?>(nil)

    init(output: any OutputSink) { self.output = output }

    var report: WormholeTransferReport {
        WormholeTransferReport(progress: { [self] done, total in draw(done, total) }, note: { [output] in output.err($0 + "\n") })
    }

    private func draw(_ done: Int64, _ total: Int64) {
        guard output.isTerminal else { return }
        let now = ContinuousClock.now
        let due = lastDraw.withLock { last -> Bool in
            if let last, now - last < .milliseconds(200), done < total { return false }
            last = now
            return true
        }
        guard due else { return }
        let seconds = max(0.001, Double((now - started).components.seconds) + Double((now - started).components.attoseconds) / 1e18)
        let percent = total > 0 ? Int(done * 100 / total) : 100
        output.err("\r\u{1B}[K\(percent)%  \(ProgressRenderer.formatBytes(done)) of \(ProgressRenderer.formatBytes(total))  \(ProgressRenderer.formatBytes(Int64(Double(done) / seconds)))/s")
    }

    func finish(_ summary: String) {
        if output.isTerminal { output.err("\r\u{1B}[K") }
        output.err(summary + "\n")
    }
}
