internal import FoundationEssentials
internal import SyncEngine

/// `syncpeer role DIR PEER [ROLE] [--no-deletes | --deletes]`: our role towards one member.
struct RoleCommand: Command {
    static let spec = CommandSpec(
        name: "role",
        abstract: "show or change our role towards one peer of a shared folder: both, send-only, receive-only",
        discussion: """
        Roles are per folder and per peer, and this device enforces them whatever the peer
        claims. send-only: our changes go to the peer; none of its changes is applied here
        (they are listed by 'syncpeer changes DIR'; 'syncpeer override DIR' makes ours win
        there). receive-only: the peer's changes are applied here; our local changes are not
        sent to it (listed as locally changed). --no-deletes: the peer's deletions are not
        applied here, whatever its role (an archive). Without ROLE the role stays as it is.
        """,
        options: [OptionSpec("no-deletes", help: "the peer's deletions are not applied here"),
                  OptionSpec("deletes", help: "the peer's deletions are applied again")],
        arguments: [ArgumentSpec("DIR", help: "a shared folder"), ArgumentSpec("PEER", help: "one of its peers"),
                    ArgumentSpec("ROLE", help: "both, send-only or receive-only", optional: true)],
        examples: ["syncpeer role ~/Site web send-only", "syncpeer role ~/Photos phone --no-deletes", "syncpeer role ~/Photos phone"])

    let directory: String
    let peer: String
    let role: String?
    let noDeletes: Bool?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        directory = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        peer = arguments.positionals[1]
        role = arguments.positionals.count > 2 ? arguments.positionals[2] : nil
        if arguments.flag("no-deletes") && arguments.flag("deletes") { throw .usage("give --no-deletes or --deletes, not both") }
        noDeletes = arguments.flag("no-deletes") ? true : arguments.flag("deletes") ? false : nil
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.role(directory: directory, peer: peer, role: role, noDeletes: noDeletes), as: RoleResult.self)
        let what = switch result.role {
        case "send-only": "send-only: our changes go to \(result.peer.name), its changes are not applied here"
        case "receive-only": "receive-only: \(result.peer.name)'s changes are applied here, ours are not sent to it"
        default: "both: changes go both ways"
        }
        context.print(result, text: "\(directory) with \(result.peer.name): \(what)"
            + (result.noDeletes ? "; its deletions are not applied here" : ""))
        return ExitCode.success
    }
}

/// `syncpeer changes DIR`: the paths where the roles keep the folder apart from its peers.
struct ChangesCommand: Command {
    static let spec = CommandSpec(
        name: "changes",
        abstract: "list a folder's remote changes not applied (send-only, no-deletes) and local changes not sent (receive-only)",
        arguments: [ArgumentSpec("DIR", help: "a shared folder")],
        examples: ["syncpeer changes ~/Site", "syncpeer changes ~/Site --json"])
    let directory: String
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        directory = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        try context.printPages(.roleChanges(directory: directory), as: RoleChange.self, empty: "no changes kept apart by roles") { item in
            let what = item.kind == "not-applied"
                ? "remote change not applied  \(item.peer.name): \(item.theirs ?? "none"), here: \(item.ours ?? "none")"
                : "locally changed, not sent  to \(item.peer.name): \(item.ours ?? "none")"
            return "\(item.path)  \(what)"
        }
        return ExitCode.success
    }
}

/// `syncpeer override DIR`: our versions win over what the roles or a held mass change keep out.
struct OverrideCommand: FolderAnswerCommand {
    static let spec = CommandSpec(
        name: "override",
        abstract: "make this folder's versions win at its peers: over the remote changes not applied, or a held mass change",
        discussion: """
        Each path a send-only or no-deletes peer changed without it being applied here, and,
        when the folder holds a peer's mass change, each path that change touches, is recorded
        again with a version newer than the peers' and sent: the peers take this device's
        version (a file deleted here is deleted there too).
        """,
        arguments: [ArgumentSpec("DIR", help: "a shared folder")],
        examples: ["syncpeer override ~/Site"])
    let directory: String
    var request: ControlRequest { .override(directory: directory) }
    func text(_ result: GuardResult) -> String {
        "\(result.overridden ?? 0) path(s) of \(directory) sent again with this device's version on top"
    }
}

/// `syncpeer guard DIR [--percent P] [--files N]`: the mass-change guard's limits.
struct GuardCommand: Command {
    static let spec = CommandSpec(
        name: "guard",
        abstract: "show or set when a peer's mass change waits for 'syncpeer confirm' (default: over 50 % or 1,000 files)",
        discussion: """
        When applying the peers' changes would delete or replace more than P % of the
        folder's files (folders of 10 files or more) or more than N files, the folder holds
        them (state error, with the question in 'syncpeer status') until 'syncpeer confirm
        DIR' applies them, keeping each replaced file under HOME/versions first, or 'syncpeer
        override DIR' sends this device's versions back. 0 turns a limit off.
        """,
        options: [OptionSpec("percent", .value("P"), help: "share of the folder's files, 0-100"),
                  OptionSpec("files", .value("N"), help: "number of files")],
        arguments: [ArgumentSpec("DIR", help: "a shared folder")],
        examples: ["syncpeer guard ~/Photos", "syncpeer guard ~/Photos --percent 20 --files 200"])
    let directory: String
    let percent: Int?
    let files: Int?
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        directory = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        func number(_ name: String) throws(CLIError) -> Int? {
            guard let text = arguments.value(name) else { return nil }
            guard let value = Int(text), value >= 0 else { throw .usage("--\(name) takes a number ≥ 0, not '\(text)'") }
            return value
        }
        percent = try number("percent")
        files = try number("files")
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.guardLimits(directory: directory, percent: percent, files: files), as: GuardResult.self)
        func limit(_ value: Int?, _ unit: String) -> String { value == 0 ? "no limit" : "\(value ?? 0)\(unit)" }
        context.print(result, text: "\(directory): a peer's change waits for confirmation over \(limit(result.percent, " %")) "
            + "of its files or \(limit(result.files, " files"))")
        return ExitCode.success
    }
}

/// `syncpeer revert DIR`: local changes kept back from receive-only peers are undone.
struct RevertCommand: FolderAnswerCommand {
    static let spec = CommandSpec(
        name: "revert",
        abstract: "undo this folder's local changes that stay back from receive-only peers: the cluster's version comes back",
        discussion: """
        Each path listed as locally changed by 'syncpeer changes DIR' takes the newest version
        the folder's peers have again (a file only this device has is deleted). The local
        file is copied under HOME/versions/FOLDER-ID/ first.
        """,
        arguments: [ArgumentSpec("DIR", help: "a shared folder")],
        examples: ["syncpeer revert ~/Photos"])
    let directory: String
    var request: ControlRequest { .revert(directory: directory) }
    func text(_ result: GuardResult) -> String {
        "\(result.reverted ?? 0) local change(s) of \(directory) reverted to the cluster's version"
    }
}

/// A command on one shared folder, `syncpeer NAME DIR`, whose answer is a `GuardResult`.
protocol FolderAnswerCommand: Command {
    var directory: String { get }
    init(directory: String)
    var request: ControlRequest { get }
    /// The line printed on success.
    func text(_ result: GuardResult) -> String
}

extension FolderAnswerCommand {
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        self.init(directory: URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path)
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(request, as: GuardResult.self)
        context.print(result, text: text(result))
        return ExitCode.success
    }
}
