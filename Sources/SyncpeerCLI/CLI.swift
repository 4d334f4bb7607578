internal import SyncEngine

/// The entry point: finds the command, parses its arguments, runs it and maps errors to
/// exit codes and one clear line on standard error.
package enum CLI {
    package static let version = SyncEngine.version

    /// Every command, in the order help lists them.
    package static let commands: [any Command.Type] = [
        InitCommand.self,
        IdCommand.self,
        DaemonCommand.self,
        PairCommand.self,
        InvitationsCommand.self,
        AcceptCommand.self,
        DeclineCommand.self,
        PeersCommand.self,
        SendCommand.self,
        ReceiveCommand.self,
        TransfersCommand.self,
        ShareCommand.self,
        UnshareCommand.self,
        ConfirmCommand.self,
        RoleCommand.self,
        ChangesCommand.self,
        OverrideCommand.self,
        RevertCommand.self,
        GuardCommand.self,
        VerifyCommand.self,
        RescanCommand.self,
        RenameCommand.self,
        ReceiveDirCommand.self,
        PauseCommand.self,
        ResumeFolderCommand.self,
        SelectCommand.self,
        TreeCommand.self,
        StatusCommand.self,
        GuiCommand.self,
        ConflictsCommand.self,
        ResolveCommand.self,
        HistoryCommand.self,
        RestoreCommand.self,
        VersionsCommand.self,
        CancelCommand.self,
        ResumeCommand.self,
        BrowseCommand.self,
        VisibilityCommand.self,
        MsgCommand.self,
        ChatCommand.self,
        DisconnectCommand.self,
        ConnectCommand.self,
        UnpairCommand.self,
        AutoAcceptCommand.self,
        EventsCommand.self,
        HelpCommand.self,
    ]

    static func command(named name: String) -> (any Command.Type)? {
        commands.first { $0.spec.name == name }
    }

    /// Runs one command line (without the program name) and returns the exit code.
    package static func run(_ arguments: [String], environment: [String: String],
                           output: any OutputSink) async -> Int32 {
        do {
            return try await dispatch(arguments, environment: environment, output: output)
        } catch {
            // With --json (anywhere on the line: it is a global option), scripts get the
            // error as one JSON object on standard error, like the results on standard output.
            if arguments.contains("--json") {
                output.errJSON(JSONError(error))
            } else {
                output.err("syncpeer: error: \(StandardOutput.shown(error.description))\n")
            }
            return error.exitCode
        }
    }

    static func dispatch(_ arguments: [String], environment: [String: String],
                         output: any OutputSink) async throws(CLIError) -> Int32 {
        // Global options may come before the command name.
        var globals = GlobalSettings()
        var help = false
        var index = 0
        var commandName: String?
        while index < arguments.count {
            let token = arguments[index]
            switch token {
            case "--version":
                // --json may come after --version too.
                if globals.json || arguments.contains("--json") { output.json(["version": version]) } else { output.line("syncpeer \(version)") }
                return ExitCode.success
            case "-h", "--help":
                help = true
            case "--json":
                globals.json = true
            case "--home":
                guard index + 1 < arguments.count else { throw .usage("option --home needs a value (DIR)") }
                globals.home = arguments[index + 1]
                index += 1
            default:
                if token.hasPrefix("--home=") {
                    globals.home = String(token.dropFirst("--home=".count))
                } else if token.hasPrefix("-") {
                    var message = "unknown option '\(token)'"
                    let globalsNames = GlobalOptions.specs.map { "--" + $0.long } + ["--version"]
                    if let near = ArgumentParser.closest(to: token, in: globalsNames) {
                        message += "; did you mean '\(near)'?"
                    } else {
                        message += "; options of a command go after its name (see 'syncpeer help')"
                    }
                    throw .usage(message)
                } else {
                    commandName = token
                }
            }
            index += 1
            if commandName != nil { break }
        }

        guard let commandName else {
            output.out(HelpFormatter.overview(commands.map { $0.spec }, version: version))
            return help ? ExitCode.success : ExitCode.usage
        }
        guard let type = command(named: commandName) else {
            var message = "unknown command '\(commandName)'"
            if let near = ArgumentParser.closest(to: commandName, in: commands.map { $0.spec.name }) {
                message += "; did you mean '\(near)'?"
            } else {
                message += "; run 'syncpeer help' for the list"
            }
            throw .usage(message)
        }
        let rest = Array(arguments[index...])
        let parsed = try ArgumentParser.parse(rest, spec: type.spec, globals: &globals, help: &help)
        if help {
            output.out(HelpFormatter.help(for: type.spec))
            return ExitCode.success
        }
        let command = try type.init(parsing: parsed)
        let context = CommandContext(globals: globals, environment: environment, output: output)
        return try await command.run(context)
    }
}
