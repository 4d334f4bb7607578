internal import SyncEngine
internal import Wormhole

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
        With --code instead of PEER: a Magic Wormhole code does the authenticating. One side
        runs 'syncpeer pair --code' and reads the code it prints to the other, who runs
        'syncpeer pair --code CODE'; the two nodes swap their keys inside the encrypted
        wormhole and end paired, with no 6-digit comparison (and no network in common: each
        dials the addresses the other sent, or finds it by discovery).
        """,
        options: [OptionSpec("context", .value("TEXT"), help: "why you invite (shown with the invitation, at most 1024 bytes)"),
                  OptionSpec("code", .optionalValue("CODE"), help: "pair with whoever holds a wormhole code: prints a new code, or uses the one given",
                             nextIsValue: WormholeCode.looksLikeCode),
                  OptionSpec("mailbox", .value("URL"), help: "with --code: the Magic Wormhole mailbox server (default \(WormholeServers.publicMailbox))")],
        arguments: [ArgumentSpec("PEER", help: "a discovered node's name or device ID (prefix), or HOST:PORT", optional: true)],
        examples: ["syncpeer pair bob", "syncpeer pair 127.0.0.1:41414 --context 'holiday photos'",
                   "syncpeer pair --code", "syncpeer pair --code 7-guitarist-revenge"])

    let address: String
    let contextText: String?
    /// `--code`: pairing through a wormhole instead.
    let byCode: WormholePair?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        contextText = arguments.value("context")
        if arguments.flag("code") {
            guard arguments.positionals.isEmpty, contextText == nil else { throw .usage("--code pairs with whoever holds the code: no PEER or --context") }
            (address, byCode) = ("", WormholePair(code: arguments.value("code"), mailbox: WormholeServers(arguments).mailbox))
            return
        }
        guard arguments.value("mailbox") == nil else { throw .usage("--mailbox goes with --code") }
        guard let peer = arguments.positionals.first else { throw .usage("'syncpeer pair' needs PEER (or --code)") }
        address = peer
        byCode = nil
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        if let byCode { return try byCode.run(context) }
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
