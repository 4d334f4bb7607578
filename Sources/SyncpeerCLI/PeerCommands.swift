internal import FoundationEssentials
internal import SyncEngine

/// `syncpeer peers [--watch]`: paired, connected and discovered peers with their states.
struct PeersCommand: Command {
    static let spec = CommandSpec(
        name: "peers",
        abstract: "list paired, connected and nearby (discovered) peers with their session states",
        discussion: "States: connected, connecting (an invitation is open), notConnected. Peers found by discovery are marked 'nearby' (\"discovered\": true in JSON); unpaired ones are only listed until you pair with them. With --watch the list is printed again whenever something changes (Ctrl-C to stop).",
        options: [OptionSpec("watch", help: "print the list again on every change"),
                  OptionSpec("names", help: "print only the paired peers' display names, one a line (what shell completion offers)")],
        examples: ["syncpeer peers", "syncpeer peers --json", "syncpeer peers --watch", "syncpeer peers --names"])

    let watch: Bool
    let names: Bool
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        watch = arguments.flag("watch")
        names = arguments.flag("names")
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        if names {
            try context.eachPage(.peers, as: [PeerSummary].self) { page in
                for item in page where item.paired { context.output.line(item.peer.name) }
            }
            return ExitCode.success
        }
        try show(context)
        guard watch else { return ExitCode.success }
        let client = try context.client()
        do {
            try client.streamEvents { event in
                if [.state, .paired, .invitation, .found, .lost].contains(event.kind) {
                    if !context.globals.json { context.output.line("") }
                    try? show(context)
                }
                return true
            }
        } catch { throw CLIError(error) }
        return ExitCode.success
    }

    func show(_ context: CommandContext) throws(CLIError) {
        try context.printPages(.peers, as: PeerSummary.self,
                               empty: "no peers yet: pair with 'syncpeer pair NAME' (see 'syncpeer browse') or 'syncpeer pair HOST:PORT'") { item in
            let paired = item.paired ? "paired" : "not paired"
            // A live session says how it runs ("direct HOST:PORT" or "relay HOST", and its
            // round trip); otherwise the address last known.
            let address = PathText.describe(path: item.path, roundTripMs: item.roundTripMs) ?? item.address ?? item.addresses.first ?? "-"
            let nearby = item.discovered ? "  nearby" : ""
            return "\(EventRenderer.peerName(item.peer))  \(item.state.rawValue)  \(paired)  \(address)\(nearby)"
        }
    }
}

/// Shared shape of the commands that act on one PEER.
struct PeerAction {
    static func spec(_ name: String, _ abstract: String, _ example: String) -> CommandSpec {
        CommandSpec(
            name: name, abstract: abstract,
            discussion: "PEER is a display name, a device ID (or a unique prefix of one), or HOST:PORT.",
            arguments: [ArgumentSpec("PEER", help: "display name, device ID (prefix) or HOST:PORT")],
            examples: [example])
    }

    static func run(_ request: ControlRequest, verb: String, _ context: CommandContext) throws(CLIError) -> Int32 {
        let result = try context.call(request, as: PeerResult.self)
        context.print(result, text: "\(verb) \(EventRenderer.peerName(result.peer))")
        return ExitCode.success
    }
}

struct UnpairCommand: Command {
    static let spec = PeerAction.spec("unpair", "forget a paired peer: its key is no longer trusted", "syncpeer unpair bob")
    let peer: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { peer = arguments.positionals[0] }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try PeerAction.run(.unpair(peer: peer), verb: "Unpaired", context) }
}

struct DisconnectCommand: Command {
    static let spec = PeerAction.spec("disconnect", "end the session with a peer (both ends see it closed)", "syncpeer disconnect bob")
    let peer: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { peer = arguments.positionals[0] }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try PeerAction.run(.disconnect(peer: peer), verb: "Disconnected", context) }
}

struct ConnectCommand: Command {
    static let spec = PeerAction.spec("connect", "connect to a paired peer now (undoes 'syncpeer disconnect')", "syncpeer connect bob")
    let peer: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { peer = arguments.positionals[0] }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try PeerAction.run(.connect(peer: peer), verb: "Connected to", context) }
}

/// `syncpeer auto-accept PEER [files|folders] on|off`: offers from this peer are received
/// without asking; files and folders are two switches.
struct AutoAcceptCommand: Command {
    static let spec = CommandSpec(
        name: "auto-accept",
        abstract: "receive a paired peer's files, or join its folders, without asking (on) or ask again (off)",
        discussion: """
        Two switches per peer. files: its offers of files and streams are accepted into the
        daemon's receive folder (daemon --receive-dir). folders: its shared folders are joined
        (synced both ways, into the receive folder) — off unless turned on, also when files
        is on; a folder it asks to join that you have already is always asked about.
        'auto-accept PEER on|off' (no switch named) is files.
        """,
        arguments: [ArgumentSpec("PEER", help: "display name, device ID (prefix) or HOST:PORT of a paired peer"),
                    ArgumentSpec("files|folders", help: "which switch (default files)", optional: true),
                    ArgumentSpec("on|off", help: "on: accept without asking; off: ask")],
        examples: ["syncpeer auto-accept laptop files on", "syncpeer auto-accept laptop folders on",
                   "syncpeer auto-accept laptop off"])

    let peer: String
    let on: Bool
    let folders: Bool

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        let values = arguments.positionals
        peer = values[0]
        guard values.count <= 3 else { throw .usage("'syncpeer auto-accept' takes PEER [files|folders] on|off") }
        switch values.count == 3 ? values[1] : "files" {
        case "files": folders = false
        case "folders": folders = true
        case let other: throw .usage("'syncpeer auto-accept' switches files or folders, not '\(other)'")
        }
        switch values.count >= 2 ? values[values.count - 1] : "" {
        case "on": on = true
        case "off": on = false
        case let other: throw .usage("'syncpeer auto-accept' takes on or off, not '\(other)'")
        }
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.autoAccept(peer: peer, on: on, folders: folders), as: PeerResult.self)
        let what = folders ? "shared folders are \(on ? "joined without asking" : "asked about")"
                           : "offers of files are \(on ? "accepted without asking" : "asked about")"
        context.print(result, text: "\(EventRenderer.peerName(result.peer)): \(what)")
        return ExitCode.success
    }
}

/// `syncpeer events`: every event of the daemon as NDJSON, until it stops.
struct EventsCommand: Command {
    static let spec = CommandSpec(
        name: "events",
        abstract: "stream every event of the running daemon as NDJSON (for scripts)",
        examples: ["syncpeer events", "syncpeer events | jq 'select(.event == \"message\")'"])

    init(parsing arguments: ParsedArguments) throws(CLIError) {}

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let client = try context.client()
        do {
            try client.streamEvents { event in
                context.output.json(event)
                return true
            }
        } catch { throw CLIError(error) }
        return ExitCode.success
    }
}
