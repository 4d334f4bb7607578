internal import SyncEngine

/// `syncpeer pair HOST:PORT [--context TEXT]`: invites a node and waits for its answer.
struct PairCommand: Command {
    static let spec = CommandSpec(
        name: "pair",
        abstract: "invite the node at HOST:PORT to pair, and wait until it accepts or declines",
        discussion: """
        Both ends show the same 6-digit code, derived from the encrypted handshake: compare
        them (by voice, on screen) before the other side accepts. If the codes differ,
        someone is in the middle: decline. Once accepted, each side pins the other's key and
        later connections need no prompt. Needs a running daemon on this home.
        """,
        options: [OptionSpec("context", .value("TEXT"), help: "why you invite (shown with the invitation, at most 1024 bytes)")],
        arguments: [ArgumentSpec("HOST:PORT", help: "the address the other daemon listens on")],
        examples: ["syncpeer pair 127.0.0.1:41414 --context 'holiday photos'"])

    let address: String
    let contextText: String?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        address = arguments.positionals[0]
        contextText = arguments.value("context")
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        var request: [String: JSONValue] = ["address": .string(address)]
        if let contextText { request["context"] = .string(contextText) }
        let output = context.output
        let json = context.globals.json
        if !json { output.line("Inviting \(address) ...") }
        let result = try context.request("pair", request) { event in
            if json { output.line(event.encodedLine()) } else if let line = EventRenderer.line(event) {
                output.line(line + " — waiting for them to accept")
            }
        }
        context.print(result, text: "Paired with \(EventRenderer.peerName(result))")
        return ExitCode.success
    }
}
