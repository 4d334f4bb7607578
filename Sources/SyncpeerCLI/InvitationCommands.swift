internal import FoundationEssentials
internal import SyncEngine

/// `syncpeer invitations`: the open invitations from peers.
struct InvitationsCommand: Command {
    static let spec = CommandSpec(
        name: "invitations",
        abstract: "list open invitations from peers (ID, name, device ID, code, context)",
        examples: ["syncpeer invitations", "syncpeer invitations --json"])

    init(parsing arguments: ParsedArguments) throws(CLIError) {}

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        try context.printPages(.invitations, as: InvitationInfo.self, empty: "no open invitations") { item in
            var line = "\(item.invitation)  \(EventRenderer.peerName(item.peer))  code \(item.code)  from \(item.address)"
            if let text = item.context { line += "  context: \(text)" }
            return line
        }
        return ExitCode.success
    }
}

/// `syncpeer accept ID` and `syncpeer decline ID`.
struct AnswerCommand {
    static func spec(accept: Bool) -> CommandSpec {
        CommandSpec(
            name: accept ? "accept" : "decline",
            abstract: accept ? "accept an invitation (pin the peer's key) or an offer of files (receive it)"
                             : "decline an invitation (nothing of the peer is kept) or an offer of files",
            options: accept ? [OptionSpec("into", .value("DIR"), help: "for an offer: where to put it (default: the daemon's receive folder)"),
                               OptionSpec("only", .repeating("PATH"), help: "for a folder: hold only this subtree here (repeatable; see 'syncpeer select')")] : [],
            arguments: [ArgumentSpec("ID", help: "an invitation ID ('syncpeer invitations') or a transfer ID ('syncpeer transfers'): any unique prefix, in any case")],
            examples: accept ? ["syncpeer accept K7Q2PX", "syncpeer accept 3f9a2c71 --into ~/Incoming"]
                             : ["syncpeer decline K7Q2PX"])
    }

    static func run(_ id: String, accept: Bool, into directory: String?, only: [String] = [], _ context: CommandContext) throws(CLIError) -> Int32 {
        // Folder IDs look like "abcde-fghij".
        if id.wholeMatch(of: #/[a-z2-7]{5}-[a-z2-7]{5}/#) != nil {
            let request: ControlRequest = only.isEmpty ? .answerShare(folder: id, accept: accept, directory: directory)
                                                       : .acceptSelected(folder: id, directory: directory, only: only)
            let result = try context.call(request, as: FolderResult.self)
            context.print(result, text: accept ? "Accepted folder \(id) into \(result.path ?? "?")" : "Declined folder \(id)")
            return ExitCode.success
        }
        guard only.isEmpty else { throw .usage("--only is for a folder ID (abcde-fghij)") }
        // Any unique prefix of an invitation ID or of an offer's transfer ID, in any case.
        let invitations = try context.all(.invitations, as: [InvitationInfo].self)
        let offers = try context.all(.transfers, as: [TransferInfo].self).filter { $0.direction == .receive && $0.state == .offered }
        let candidates = invitations.map { IDPrefix.Candidate(id: $0.invitation, label: "invitation from \($0.peer.name)") }
            + offers.compactMap { offer in
                offer.transfer.map { IDPrefix.Candidate(id: $0, label: "offer of \(offer.name) from \(offer.peer?.name ?? "?")") }
            }
        let chosen: String
        switch IDPrefix.match(id, in: candidates) {
        case let .one(candidate): chosen = candidate.id
        case let .ambiguous(found): throw .usage(IDPrefix.ambiguity(id, found))
        case .none:
            throw .engine(.notFound, "no invitation or offer '\(id)' is waiting: see 'syncpeer invitations' and 'syncpeer transfers'")
        }
        if offers.contains(where: { $0.transfer == chosen }) {
            let renderer = ProgressRenderer(output: context.output, json: context.globals.json)
            let result = try context.call(.answerOffer(transfer: chosen, accept: accept, directory: directory, follow: accept),
                                          as: TransferInfo.self, onEvent: renderer.show)
            renderer.finish(with: result)
            context.print(NodeEvent.transfer(result), text: accept ? SendCommand.summary(result, verb: "Received", preposition: "from")
                                               : "Declined \(result.name)")
            return ExitCode.success
        }
        let id = chosen
        let result = try context.call(.answerInvitation(invitation: id, accept: accept), as: PeerResult.self)
        context.print(result, text: (accept ? "Accepted " : "Declined ") + EventRenderer.peerName(result.peer))
        return ExitCode.success
    }
}

struct AcceptCommand: Command {
    static let spec = AnswerCommand.spec(accept: true)
    let id: String
    let directory: String?
    let only: [String]
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        id = arguments.positionals[0]
        directory = arguments.value("into").map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        only = arguments.all("only")
    }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try AnswerCommand.run(id, accept: true, into: directory, only: only, context) }
}

struct DeclineCommand: Command {
    static let spec = AnswerCommand.spec(accept: false)
    let id: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { id = arguments.positionals[0] }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try AnswerCommand.run(id, accept: false, into: nil, context) }
}
