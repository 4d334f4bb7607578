package import SyncEngine

/// A subcommand: a spec for the parser and help, a validating initialiser, and `run`.
package protocol Command: Sendable {
    static var spec: CommandSpec { get }
    /// Builds the command from parsed arguments, validating every value (usage errors).
    init(parsing arguments: ParsedArguments) throws(CLIError)
    /// Does the work; returns the exit code (usually `ExitCode.success`).
    func run(_ context: CommandContext) async throws(CLIError) -> Int32
}

/// What a running command may use: global settings, the environment and the output.
package struct CommandContext: Sendable {
    package let globals: GlobalSettings
    package let environment: [String: String]
    package let output: any OutputSink

    package init(globals: GlobalSettings, environment: [String: String], output: any OutputSink) {
        self.globals = globals
        self.environment = environment
        self.output = output
    }

    /// The node home chosen by `--home`, `SYNCPEER_HOME` or the XDG default.
    package var home: NodeHome { NodeHome.resolve(explicit: globals.home, environment: environment) }
}

extension CLIError {
    /// Maps an engine error to the CLI's error (its kind gives the exit code).
    init(_ error: EngineError) {
        self = .engine(error.kind, error.description)
    }
}
