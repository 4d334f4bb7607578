internal import FoundationEssentials
internal import Synchronization
internal import SyncEngine
internal import Wormhole
internal import PeerFiles

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

    /// What `send --code` and `receive CODE` tell the other side they can do beyond Magic
    /// Wormhole (only another syncpeer reads it): the chunked, resumable transfer.
    static var appVersions: [String: Any] { WormholeSession.appVersions(abilities: [WormholeResume.ability]) }

    /// The transit relay as a hint.
    func relays() throws(WormholeError) -> [TransitHints.Address] {
        guard let colon = transitRelay.lastIndex(of: ":"), let port = UInt16(transitRelay[transitRelay.index(after: colon)...]), port != 0 else {
            throw .transfer("--transit-relay \(transitRelay): expected HOST:PORT")
        }
        return [TransitHints.Address(host: transitRelay[..<colon].trimming { $0 == "[" || $0 == "]" }, port: port)]
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
        let given: WormholeCode?
        do throws(WormholeError) { given = try code.map { c throws(WormholeError) in try WormholeCode(parsing: c) } } catch { throw CLIError(error) }
        let session: WormholeSession
        do {
            session = try WormholeSession.open(url: servers.mailbox, code: given, appVersions: WormholeServers.appVersions) { code in
                WormholeCodeEvent.announce(code, context, text: "Wormhole code is: \(code)\nOn the other computer, run one of:\n\n  syncpeer receive \(code)\n  wormhole receive \(code)\n\n")
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
                if context.globals.json { context.output.json(WormholeText(text: text)) } else { context.output.err("text message sent\n") }
            case let .path(path):
                let line = WormholeProgressLine(context, direction: .send, name: PathName.lastComponent(path))
                try WormholeFileSender(session: session, path: path, relays: try servers.relays(), report: line.report).run()
                line.finish("Sent \(PathName.lastComponent(path))")
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
        if context.globals.json {
            context.output.errJSON(JSONError(error: "Cancelled; the other side was told.", kind: "cancelled", exit: ExitCode.interrupted))
        } else {
            context.output.err("\nCancelled; the other side was told.\n")
        }
        return ExitCode.interrupted
    }
}

/// `syncpeer receive CODE`: a text (printed to standard output) or a file into `--dir`.
struct WormholeReceive: Sendable {
    let code: String
    let directory: String?
    let servers: WormholeServers

    func run(_ context: CommandContext) throws(CLIError) -> Int32 {
        let session: WormholeSession
        do throws(WormholeError) {
            session = try WormholeSession.open(url: servers.mailbox, code: try WormholeCode(parsing: code), appVersions: WormholeServers.appVersions)
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
                    if context.globals.json { context.output.json(WormholeText(text: text)) } else { context.output.out(text + "\n") }
                    try session.send(["answer": ["message_ack": "ok"]])
                    session.close()
                    return ExitCode.success
                }
                let target = directory ?? FileManager.default.currentDirectoryPath
                let line = WormholeProgressLine(context, direction: .receive, name: WormholeText.offeredName(offer))
                let path = try WormholeFileReceiver(session: session, offer: offer, senderTransit: transit, directory: target,
                                                    relays: try servers.relays(), report: line.report).run()
                line.finish("Received → \(path)", path: path)
                session.close()
                return ExitCode.success
            }
        } catch {
            session.close(mood: "errory")
            return try WormholeInterrupted.check(interrupt, error, context)
        }
    }
}

/// `send --code` under `--json`: the code to read aloud, as the `wormhole_code` event.
struct WormholeCodeEvent: Encodable {
    let event = "wormhole_code"
    let code: String
    let time = Int64(Date().timeIntervalSince1970 * 1000)

    /// Shows a new code: the event under `--json`, else `text` on standard error.
    static func announce(_ code: WormholeCode, _ context: CommandContext, text: String) {
        if context.globals.json { context.output.json(WormholeCodeEvent(code: code.description)) } else { context.output.err(text) }
    }
}

/// A text sent or received with a code, as `--json` prints it.
struct WormholeText: Encodable {
    let text: String

    /// The file or folder name an offer gives (for the progress events), before it is checked.
    static func offeredName(_ offer: [String: Any]) -> String {
        let name = (offer["file"] as? [String: Any])?["filename"] as? String ?? (offer["directory"] as? [String: Any])?["dirname"] as? String ?? "?"
        return String(name.prefix(255))
    }
}
