internal import FoundationEssentials
internal import SyncEngine

/// `syncpeer rename NAME`: the running daemon's display name, changed at once.
struct RenameCommand: Command {
    static let spec = CommandSpec(
        name: "rename",
        abstract: "change this node's display name while the daemon runs",
        discussion: """
        The name is kept (as 'syncpeer init --name' keeps it) and used at once: nearby nodes
        see it as discovery announces this node again, and paired peers at their next
        connection. The device ID does not change, so nothing needs pairing again.
        """,
        arguments: [ArgumentSpec("NAME", help: "the new display name (at most 63 bytes)")],
        examples: ["syncpeer rename \"bob's laptop\""])
    let name: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { name = arguments.positionals[0] }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.rename(name: name), as: RenameResult.self)
        context.print(result, text: "This node is now called \(result.name)")
        return ExitCode.success
    }
}

/// `syncpeer receive-dir DIR`: where the running daemon puts what it accepts.
struct ReceiveDirCommand: Command {
    static let spec = CommandSpec(
        name: "receive-dir",
        abstract: "change where the running daemon puts accepted files and folders",
        discussion: """
        From now on, and after restarts: accepted files, streams and folders go to DIR (made
        with its parents if missing). 'syncpeer daemon --receive-dir' names another for that
        run only.
        """,
        arguments: [ArgumentSpec("DIR", help: "a folder this user can write into")],
        examples: ["syncpeer receive-dir ~/Inbox"])
    let directory: String
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        directory = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.receiveDir(directory: directory), as: NodeStatus.self)
        context.print(ReceiveDirResult(receiveDir: result.receiveDir), text: "Accepted files and folders now go to \(result.receiveDir)")
        return ExitCode.success
    }
}

/// What `receive-dir --json` prints.
struct ReceiveDirResult: Encodable {
    let receiveDir: String
}
