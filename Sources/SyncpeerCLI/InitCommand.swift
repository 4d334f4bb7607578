internal import SyncEngine
internal import PeerCrypto

/// `syncpeer init [--name NAME]`: creates the node's identity, or keeps the existing one.
struct InitCommand: Command {
    static let spec = CommandSpec(
        name: "init",
        abstract: "create this node's identity (key pair, device ID) and display name",
        discussion: """
        Creates the home directory (mode 0700), a new X25519 key pair in identity.key
        (mode 0600) and the index. Running it again keeps the existing identity and says
        so; with --name it changes the display name. The display name is what nearby
        peers see: at most 63 bytes of UTF-8 (default: the host name).
        """,
        options: [OptionSpec("name", .value("NAME"), help: "display name shown to peers (at most 63 bytes; default: the host name)")],
        examples: ["syncpeer init --name laptop", "syncpeer --home /tmp/node-a init --name alice"])

    let name: String?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        name = arguments.value("name")
        if let name {
            do { _ = try DisplayName.validate(name) } catch { throw CLIError(error) }
        }
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result: NodeSetup.InitResult
        do { result = try NodeSetup.initialise(home: context.home, name: name) } catch { throw CLIError(error) }
        let identity = result.identity
        if context.globals.json {
            context.output.json(InitReport(id: identity.deviceID.description, name: identity.displayName,
                                           home: context.home.path, created: result.createdIdentity))
            return ExitCode.success
        }
        if result.createdIdentity {
            context.output.line("Created a new identity in \(context.home.path)")
        } else {
            context.output.line("Already initialised in \(context.home.path): keeping the existing identity")
            if result.nameChanged { context.output.line("Display name changed to \(identity.displayName)") }
        }
        context.output.line("Device ID: \(identity.deviceID)")
        context.output.line("Name:      \(identity.displayName)")
        if result.createdIdentity {
            context.output.line("Next: run 'syncpeer daemon', or with the user unit of 'make install': systemctl --user enable --now syncpeer")
        }
        return ExitCode.success
    }

    struct InitReport: Encodable {
        let id: String
        let name: String
        let home: String
        let created: Bool
    }
}
