/// Renders help text from command specs.
enum HelpFormatter {
    static func usageLine(_ spec: CommandSpec) -> String {
        var parts = ["syncpeer", spec.name]
        parts += spec.options.map { "[\($0.usageFragment)]" }
        parts += spec.arguments.map(\.usageFragment)
        return parts.joined(separator: " ")
    }

    static func help(for spec: CommandSpec) -> String {
        var out = "syncpeer \(spec.name) — \(spec.abstract)\n\nUsage: \(usageLine(spec))\n"
        if !spec.discussion.isEmpty { out += "\n\(spec.discussion)\n" }
        if !spec.arguments.isEmpty {
            out += "\nArguments:\n" + table(spec.arguments.map { ($0.name, $0.help) })
        }
        if !spec.options.isEmpty {
            out += "\nOptions:\n" + table(spec.options.map(optionRow))
        }
        out += "\nGlobal options:\n" + table(GlobalOptions.specs.map(optionRow))
        if !spec.examples.isEmpty {
            out += "\nExamples:\n" + spec.examples.map { "  \($0)\n" }.joined()
        }
        return out
    }

    static func overview(_ commands: [CommandSpec], version: String) -> String {
        var out = """
        syncpeer \(version) — encrypted peer-to-peer file synchronization for nearby machines

        Usage: syncpeer [--home DIR] [--json] COMMAND [OPTIONS] [ARGUMENTS]

        Commands:

        """
        out += table(commands.map { ($0.name, $0.abstract) })
        out += "\nGlobal options:\n" + table(GlobalOptions.specs.map(optionRow) + [("--version", "print the version and exit")])
        out += "\nRun 'syncpeer help COMMAND' for a command's options and examples.\n"
        out += "Exit codes: 0 success, 1 failure, 2 usage error, 3 missing state (e.g. not initialised), 4 damaged data.\n"
        return out
    }

    static func optionRow(_ option: OptionSpec) -> (String, String) {
        let left = (option.short.map { "-\($0), " } ?? "") + option.usageFragment
        return (left, option.help)
    }

    static func table(_ rows: [(String, String)]) -> String {
        let width = min(28, rows.map(\.0.count).max() ?? 0)
        return rows.map { left, right in
            let padding = left.count < width ? String(repeating: " ", count: width - left.count) : ""
            let separator = left.count > width ? "\n  " + String(repeating: " ", count: width + 2) : padding + "  "
            return "  \(left)\(separator)\(right)\n"
        }.joined()
    }
}
