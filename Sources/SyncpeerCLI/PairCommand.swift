internal import SyncEngine

/// `syncpeer pair PEER [--context TEXT]`: invites a node and waits for its answer.
struct PairCommand: Command {
    static let spec = CommandSpec(
        name: "pair",
        abstract: "invite a nearby node (by name) or the node at HOST:PORT to pair, and wait for its answer",
        discussion: """
        Both ends show the same 6-digit code, derived from the encrypted handshake: compare
        them (by voice, on screen) before the other side accepts. If the codes differ,
        someone is in the middle: decline. Once accepted, each side pins the other's key and
        later connections need no prompt. Needs a running daemon on this home.
        PEER is the name (or device ID, or a unique prefix of one) of a node listed by
        'syncpeer browse', or HOST:PORT. The device ID a discovered node advertises must be
        the key that answers, else the connection is refused. PEER may also be the other
        node's certificate ID (the second line of its 'syncpeer id'): it is then looked up
        at the daemon's --discovery-server and reached there or through its --relay.
        """,
        options: [OptionSpec("context", .value("TEXT"), help: "why you invite (shown with the invitation, at most 1024 bytes)")],
        arguments: [ArgumentSpec("PEER", help: "a discovered node's name or device ID (prefix), or HOST:PORT")],
        examples: ["syncpeer pair bob", "syncpeer pair 127.0.0.1:41414 --context 'holiday photos'"])

    let address: String
    let contextText: String?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        address = arguments.positionals[0]
        contextText = arguments.value("context")
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let output = context.output
        let json = context.globals.json
        if !json { output.line("Inviting \(address) ...") }
        let result = try context.call(.pair(address: address, context: contextText), as: PeerResult.self) { event in
            if json { output.json(event) } else if let line = EventRenderer.line(event) {
                output.line(line + " — waiting for them to accept")
            }
        }
        context.print(result, text: "Paired with \(EventRenderer.peerName(result.peer))")
        return ExitCode.success
    }
}
