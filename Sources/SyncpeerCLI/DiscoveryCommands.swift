internal import SyncEngine

/// `syncpeer browse [--watch]`: nearby nodes found by the daemon's discovery.
struct BrowseCommand: Command {
    static let spec = CommandSpec(
        name: "browse",
        abstract: "list nearby syncpeer nodes found by discovery (DNS-SD over multicast DNS)",
        discussion: """
        Lists every node of the same service type the daemon sees on its interfaces: its
        name, device ID, address and discovery info, and whether it is paired. Pair with
        one by name: 'syncpeer pair NAME'. With --watch, found and lost nodes are printed as
        they come and go (Ctrl-C to stop); with --json, one object per line.
        """,
        options: [OptionSpec("watch", help: "keep printing nodes as they are found and lost")],
        examples: ["syncpeer browse", "syncpeer browse --json", "syncpeer browse --watch"])

    let watch: Bool
    init(parsing arguments: ParsedArguments) throws(CLIError) { watch = arguments.flag("watch") }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let output = context.output
        let json = context.globals.json
        let client = try context.client()
        try context.printPages(.browse, as: BrowsedPeer.self, client: client,
                               empty: watch ? nil : "no nodes found nearby (yet); discovery finds nodes of the same service type on the same network",
                               line: Self.line)
        guard watch else { return ExitCode.success }
        do {
            try client.streamEvents { event in
                guard event.kind == .found || event.kind == .lost else { return true }
                if json { output.json(event) } else if let line = EventRenderer.line(event) { output.line(line) }
                return true
            }
        } catch { throw CLIError(error) }
        return ExitCode.success
    }

    static func line(_ item: BrowsedPeer) -> String {
        var text = "\(EventRenderer.peerName(item.peer))  \(item.address ?? "-")"
        text += item.paired ? "  paired" : "  not paired"
        if !item.info.isEmpty {
            text += "  " + item.info.keys.sorted().map { "\($0)=\(item.info[$0] ?? "")" }.joined(separator: " ")
        }
        return text
    }
}

/// `syncpeer visibility [on|off]`: shows or hides this node on the network at run time.
struct VisibilityCommand: Command {
    static let spec = CommandSpec(
        name: "visibility",
        abstract: "show (on) or hide (off) this node to others on the network, or print the current setting",
        discussion: """
        'off' withdraws the advertisement at once (goodbye packets): other nodes report this
        one lost and stop listing it; the daemon keeps browsing and its sessions go on.
        'on' announces it again. 'syncpeer daemon --invisible' starts hidden.
        """,
        arguments: [ArgumentSpec("on|off", help: "on: advertise; off: hide; nothing: show the setting", optional: true)],
        examples: ["syncpeer visibility off", "syncpeer visibility on", "syncpeer visibility --json"])

    let visible: Bool?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        switch arguments.positionals.first {
        case nil: visible = nil
        case "on": visible = true
        case "off": visible = false
        case let other?: throw .usage("visibility takes 'on' or 'off', got '\(other)'")
        }
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.visibility(visible: visible), as: DiscoveryStatus.self)
        let shown = result.visible == true
        let name = result.instance.map { " as '\($0)'" } ?? ""
        context.print(result, text: shown ? "visible to others\(name)" : "invisible to others")
        return ExitCode.success
    }
}
