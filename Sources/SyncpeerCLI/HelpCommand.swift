internal import FoundationEssentials
internal import PeerFiles

/// `syncpeer help [COMMAND]`: the overview, or one command's help; `--man DIR` and
/// `--completion SHELL` give the same texts as man pages and completion scripts (what
/// `make install` installs).
struct HelpCommand: Command {
    static let spec = CommandSpec(
        name: "help",
        abstract: "show help for syncpeer or for one command",
        options: [
            OptionSpec("man", .value("DIR"), help: "write the man pages (syncpeer.1, syncpeer-COMMAND.1) into DIR"),
            OptionSpec("completion", .value("SHELL"), help: "print the completion script for bash, zsh or fish",
                      values: ["bash", "zsh", "fish"]),
        ],
        arguments: [ArgumentSpec("COMMAND", help: "the command to explain", optional: true)],
        examples: ["syncpeer help", "syncpeer help init", "syncpeer help --man /tmp/man1 && man -l /tmp/man1/syncpeer-send.1",
                   "source <(syncpeer help --completion bash)"])

    let topic: String?
    let manDirectory: String?
    let shell: ManualFormatter.Shell?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        topic = arguments.positionals.first
        manDirectory = arguments.value("man")
        if let name = arguments.value("completion") {
            guard let shell = ManualFormatter.Shell(rawValue: name) else {
                throw .usage("--completion takes bash, zsh or fish, not '\(name)'")
            }
            self.shell = shell
        } else {
            shell = nil
        }
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let specs = CLI.commands.map { $0.spec }
        if let shell {
            context.output.out(ManualFormatter.completion(shell, specs))
            return ExitCode.success
        }
        if let manDirectory {
            let directory = URL(fileURLWithPath: manDirectory)
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                for page in ManualFormatter.pages(specs, version: CLI.version) {
                    try Data(page.text.utf8).write(to: directory.appendingPathComponent(page.name))
                }
            } catch {
                throw .failure("cannot write the man pages into \(manDirectory): \(PlainText.reason(error))")
            }
            return ExitCode.success
        }
        guard let topic else {
            context.output.out(HelpFormatter.overview(specs, version: CLI.version))
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
