#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import FoundationEssentials
internal import SyncEngine
internal import PeerNet

/// `syncpeer msg --to PEER TEXT`: one encrypted message to a connected peer.
struct MsgCommand: Command {
    static let spec = CommandSpec(
        name: "msg",
        abstract: "send an encrypted message to a connected, paired peer",
        options: [OptionSpec("to", .value("PEER"), help: "display name, device ID (prefix) or HOST:PORT")],
        arguments: [ArgumentSpec("TEXT", help: "the message (at most 64 KiB of UTF-8)")],
        examples: ["syncpeer msg --to bob 'dinner is ready'"])

    let peer: String
    let text: String

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        guard let peer = arguments.value("to") else { throw .usage("'syncpeer msg' needs --to PEER") }
        self.peer = peer
        text = arguments.positionals[0]
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.message(peer: peer, text: text), as: PeerResult.self)
        context.print(result, text: "sent to \(EventRenderer.peerName(result.peer))")
        return ExitCode.success
    }
}

/// `syncpeer chat PEER`: lines typed are sent; lines received are shown with the sender.
struct ChatCommand: Command {
    static let spec = CommandSpec(
        name: "chat",
        abstract: "chat with a connected peer: typed lines are sent, received ones shown",
        discussion: "End with Ctrl-D. Messages from other peers are shown too, with their names.",
        arguments: [ArgumentSpec("PEER", help: "display name, device ID (prefix) or HOST:PORT")],
        examples: ["syncpeer chat bob"])

    let peer: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { peer = arguments.positionals[0] }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let listener = try context.client()
        let sender = try context.client()
        let output = context.output
        let json = context.globals.json
        // Check the peer first, so a typo fails before anything is typed.
        _ = try context.call(.peers, as: [PeerSummary].self)
        OSThread.start(name: "syncpeer-chat") {
            try? listener.streamEvents { event in
                switch event {
                case .message:
                    if json { output.json(event) } else if let line = EventRenderer.line(event) { output.line(line) }
                case let .state(change) where change.state == .notConnected:
                    if json { output.json(event) } else { output.line("\(EventRenderer.peerName(change.peer)) left") }
                default:
                    break
                }
                return true
            }
        }
        if !json { output.line("chatting with \(peer); Ctrl-D to end") }
        while let line = readLine(strippingNewline: true) {
            if line.isEmpty { continue }
            do { _ = try sender.request(.message(peer: peer, text: line)) } catch {
                throw CLIError(error)
            }
        }
        return ExitCode.success
    }
}
