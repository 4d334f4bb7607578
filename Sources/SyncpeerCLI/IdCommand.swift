internal import SyncEngine
internal import PeerCrypto

/// `syncpeer id`: prints this node's device ID and display name, and its certificate ID.
struct IdCommand: Command {
    static let spec = CommandSpec(
        name: "id",
        abstract: "print this node's device ID and display name",
        discussion: """
        The device ID is derived from the node's public key (BLAKE2b-256, base32, with
        check characters); give it to a peer so it can recognise you. The second line is the
        certificate ID that Syncthing's relays and global discovery servers know this node by
        (the SHA-256 of a certificate derived from the same key; README "Beyond the local
        network"). With --json prints {"id": ..., "name": ..., "certificateID": ...}.
        """,
        examples: ["syncpeer id", "syncpeer id --json"])

    init(parsing arguments: ParsedArguments) throws(CLIError) {}

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let identity: Identity
        do { identity = try NodeSetup.loadIdentity(home: context.home) } catch { throw CLIError(error) }
        let certificateID: String
        do { certificateID = try identity.tlsIdentity().id.description } catch { throw CLIError(error) }
        if context.globals.json {
            context.output.json(["id": identity.deviceID.description, "name": identity.displayName,
                                 "certificateID": certificateID])
        } else {
            context.output.line("\(identity.deviceID)  \(identity.displayName)")
            context.output.line("certificate ID \(certificateID) (relays, global discovery)")
        }
        return ExitCode.success
    }
}
