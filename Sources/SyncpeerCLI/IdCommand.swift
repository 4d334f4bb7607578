internal import SyncEngine
internal import PeerCrypto

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
