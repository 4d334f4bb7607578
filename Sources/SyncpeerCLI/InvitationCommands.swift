internal import SyncEngine

/// `syncpeer invitations`: the open invitations from peers.
struct InvitationsCommand: Command {
    static let spec = CommandSpec(
        name: "invitations",
        abstract: "list open invitations from peers (ID, name, device ID, code, context)",
        examples: ["syncpeer invitations", "syncpeer invitations --json"])

    init(parsing arguments: ParsedArguments) throws(CLIError) {}

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let list = try context.request("invitations").arrayValue ?? []
        if context.globals.json {
            for item in list { context.output.line(item.encodedLine()) }
        } else if list.isEmpty {
            context.output.line("no open invitations")
        } else {
            for item in list {
                var line = "\(item["invitation"]?.stringValue ?? "?")  \(EventRenderer.peerName(item))  code \(item["sas"]?.stringValue ?? "?")  from \(item["address"]?.stringValue ?? "?")"
                if let text = item["context"]?.stringValue { line += "  context: \(text)" }
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
            abstract: accept ? "accept an invitation: pin the peer's key and connect"
                             : "decline an invitation: nothing of the peer is kept",
            arguments: [ArgumentSpec("ID", help: "the invitation ID shown by 'syncpeer invitations'")],
            examples: [accept ? "syncpeer accept K7Q2PX" : "syncpeer decline K7Q2PX"])
    }

    static func run(_ id: String, accept: Bool, _ context: CommandContext) throws(CLIError) -> Int32 {
        let result = try context.request(accept ? "accept" : "decline", ["invitation": .string(id)])
        context.print(result, text: (accept ? "Accepted " : "Declined ") + EventRenderer.peerName(result))
        return ExitCode.success
    }
}

struct AcceptCommand: Command {
    static let spec = AnswerCommand.spec(accept: true)
    let id: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { id = arguments.positionals[0] }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try AnswerCommand.run(id, accept: true, context) }
}

struct DeclineCommand: Command {
    static let spec = AnswerCommand.spec(accept: false)
    let id: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { id = arguments.positionals[0] }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 { try AnswerCommand.run(id, accept: false, context) }
}
