/// `syncpeer help [COMMAND]`: the overview, or one command's help.
struct HelpCommand: Command {
    static let spec = CommandSpec(
        name: "help",
        abstract: "show help for syncpeer or for one command",
        arguments: [ArgumentSpec("COMMAND", help: "the command to explain", optional: true)],
        examples: ["syncpeer help", "syncpeer help init"])

    let topic: String?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        topic = arguments.positionals.first
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        guard let topic else {
            context.output.out(HelpFormatter.overview(CLI.commands.map { $0.spec }, version: CLI.version))
            return ExitCode.success
        }
        guard let type = CLI.command(named: topic) else {
            var message = "no command '\(topic)'"
            if let near = ArgumentParser.closest(to: topic, in: CLI.commands.map { $0.spec.name }) {
                message += "; did you mean '\(near)'?"
            }
            throw .usage(message)
        }
        context.output.out(HelpFormatter.help(for: type.spec))
        return ExitCode.success
    }
}
