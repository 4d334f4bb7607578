internal import SyncEngine
internal import PeerCrypto

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

/// `syncpeer id`: prints this node's device ID and display name.
struct IdCommand: Command {
    static let spec = CommandSpec(
        name: "id",
        abstract: "print this node's device ID and display name",
        discussion: """
        The device ID is derived from the node's public key (BLAKE2b-256, base32, with
        check characters); give it to a peer so it can recognise you. With --json prints
        {"id": ..., "name": ...}.
        """,
        examples: ["syncpeer id", "syncpeer id --json"])

    init(parsing arguments: ParsedArguments) throws(CLIError) {}

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let identity: Identity
        do { identity = try NodeSetup.loadIdentity(home: context.home) } catch { throw CLIError(error) }
        if context.globals.json {
            context.output.json(["id": identity.deviceID.description, "name": identity.displayName])
        } else {
            context.output.line("\(identity.deviceID)  \(identity.displayName)")
        }
        return ExitCode.success
    }
}
