internal import Foundation
internal import SyncEngine

/// `syncpeer invitations`: the open invitations from peers.
struct InvitationsCommand: Command {
    static let spec = CommandSpec(
        name: "invitations",
        abstract: "list open invitations from peers (ID, name, device ID, code, context)",
        examples: ["syncpeer invitations", "syncpeer invitations --json"])

    init(parsing arguments: ParsedArguments) throws(CLIError) {}

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let list = try context.call(.invitations, as: [InvitationInfo].self)
        if context.globals.json {
            context.printLines(list)
        } else if list.isEmpty {
            context.output.line("no open invitations")
        } else {
            for item in list {
                var line = "\(item.invitation)  \(EventRenderer.peerName(item.peer))  code \(item.code)  from \(item.address)"
                if let text = item.context { line += "  context: \(text)" }
                context.output.line(line)
            }
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
            options: accept ? [OptionSpec("into", .value("DIR"), help: "for an offer: where to put it (default: the daemon's receive folder)")] : [],
            arguments: [ArgumentSpec("ID", help: "an invitation ID ('syncpeer invitations') or a transfer ID ('syncpeer transfers')")],
            examples: accept ? ["syncpeer accept K7Q2PX", "syncpeer accept 3f9a2c71 --into ~/Incoming"]
                             : ["syncpeer decline K7Q2PX"])
    }

    static func run(_ id: String, accept: Bool, into directory: String?, _ context: CommandContext) throws(CLIError) -> Int32 {
        // Folder IDs look like "abcde-fghij".
        if id.wholeMatch(of: #/[a-z2-7]{5}-[a-z2-7]{5}/#) != nil {
            let result = try context.call(.answerShare(folder: id, accept: accept, directory: directory), as: FolderResult.self)
            context.print(result, text: accept ? "Accepted folder \(id) into \(result.path ?? "?")" : "Declined folder \(id)")
            return ExitCode.success
        }
        // Invitation IDs are 6 letters and digits; transfer IDs are hex (32 digits, or a prefix of 7 or more).
        if id.count >= 7, id.allSatisfy(\.isHexDigit) {
            let renderer = ProgressRenderer(output: context.output, json: context.globals.json)
            let result = try context.call(.answerOffer(transfer: id, accept: accept, directory: directory, follow: accept),
                                          as: TransferInfo.self, onEvent: renderer.show)
            renderer.finish()
            context.print(NodeEvent.transfer(result), text: accept ? SendCommand.summary(result, verb: "Received", preposition: "from")
                                               : "Declined \(result.name)")
            return ExitCode.success
        }
        let result = try context.call(.answerInvitation(invitation: id, accept: accept), as: PeerResult.self)
        context.print(result, text: (accept ? "Accepted " : "Declined ") + EventRenderer.peerName(result.peer))
        return ExitCode.success
    }
}

struct AcceptCommand: Command {
    static let spec = AnswerCommand.spec(accept: true)
    let id: String
    let directory: String?
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        id = arguments.positionals[0]
        directory = arguments.value("into").map { URL(fileURLWithPath: $0).standardizedFileURL.path }
    }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try AnswerCommand.run(id, accept: true, into: directory, context) }
}

struct DeclineCommand: Command {
    static let spec = AnswerCommand.spec(accept: false)
    let id: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { id = arguments.positionals[0] }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try AnswerCommand.run(id, accept: false, into: nil, context) }
}
