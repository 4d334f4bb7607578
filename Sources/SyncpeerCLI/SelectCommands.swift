internal import FoundationEssentials
internal import SyncEngine

/// `syncpeer select DIR [PATH ...] | --all`: which subtrees of a shared folder this device holds.
struct SelectCommand: Command {
    static let spec = CommandSpec(
        name: "select",
        abstract: "hold only some subtrees of a shared folder on this device (selective sync)",
        discussion: """
        Without PATH, shows what is selected. With PATHs (relative to DIR, or in full), this
        device holds only those subtrees (and the folders above them): nothing else is fetched,
        and nothing is deleted anywhere because this device does not hold it: the other devices
        keep syncing it among themselves. Files outside the selection that are already here
        are removed when another device holds the same version (space is freed; no deletion is
        sent); files only this device has stay, and stay local, as ignored files do. --all
        holds the whole folder again: what is missing is fetched, with progress in
        'syncpeer status' and 'syncpeer events'; with --wait this command follows the fetch
        (a live line on a terminal; with --json one result a line, the last with neededFiles
        0) until everything selected is here. 'syncpeer tree DIR' shows what there is.
        """,
        options: [OptionSpec("all", help: "hold the whole folder again"),
                  OptionSpec("wait", help: "follow the fetch until everything selected is here")],
        arguments: [ArgumentSpec("DIR", help: "a shared folder"),
                    ArgumentSpec("PATH", help: "a subtree to hold", optional: true, repeating: true)],
        examples: ["syncpeer select ~/Shared", "syncpeer select ~/Shared photos/2026 docs", "syncpeer select ~/Shared --all --wait"])

    let directory: String
    let paths: [String]?
    let wait: Bool

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        let root = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        directory = root
        wait = arguments.flag("wait")
        let given = Array(arguments.positionals.dropFirst())
        if arguments.flag("all") {
            guard given.isEmpty else { throw .usage("'syncpeer select' takes PATHs or --all, not both") }
            paths = []
        } else {
            paths = given.isEmpty ? nil : try given.map { path throws(CLIError) in try Self.relative(path, in: root) }
        }
    }

    /// PATH as typed: relative to DIR, or in full inside it.
    static func relative(_ given: String, in directory: String) throws(CLIError) -> String {
        guard given.hasPrefix("/") else { return given }
        let full = URL(fileURLWithPath: given).standardizedFileURL.path
        guard full.hasPrefix(directory + "/") else { throw .usage("\(given) is not inside \(directory)") }
        return String(full.dropFirst(directory.count + 1))
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.select(directory: directory, paths: paths), as: SelectionResult.self)
        var text = result.selected.isEmpty ? "\(directory): this device holds the whole folder"
                                           : "\(directory): this device holds " + result.selected.joined(separator: ", ")
        if result.freedFiles > 0 { text += "\nFreed \(result.freedFiles) file(s), \(ProgressRenderer.formatBytes(result.freedBytes)) (other devices keep them)" }
        if result.keptFiles > 0 { text += "\nKept \(result.keptFiles) deselected file(s): no other device holds their version, or they changed" }
        if result.neededFiles > 0 {
            text += "\n" + (wait ? "Fetching" : "To fetch (see 'syncpeer status'):") + " " + Self.needText(result)
        }
        context.print(result, text: text)
        guard wait, result.neededFiles > 0 else { return ExitCode.success }
        return try await SelectionFollow(context: context, directory: directory, first: result).run()
    }

    /// "12 file(s), 3.4 MB".
    static func needText(_ result: SelectionResult) -> String {
        "\(result.neededFiles) file(s), \(ProgressRenderer.formatBytes(result.neededBytes))"
    }
}

/// `syncpeer tree DIR [PATH]`: one level of a folder's tree as the cluster has it.
struct TreeCommand: Command {
    static let spec = CommandSpec(
        name: "tree",
        abstract: "list a shared folder's files and folders as the other devices have them, with what this device holds",
        discussion: """
        One level at a time: the names directly inside PATH (the folder's root by default),
        from the indexes the other devices sent, each with its files and size in the cluster,
        what of it is here, and whether 'syncpeer select' holds it (all, some, none).
        """,
        arguments: [ArgumentSpec("DIR", help: "a shared folder"), ArgumentSpec("PATH", help: "a folder inside it", optional: true)],
        examples: ["syncpeer tree ~/Shared", "syncpeer tree ~/Shared photos --json"])

    let directory: String
    let path: String?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        let root = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        directory = root
        path = try arguments.positionals.dropFirst().first.map { path throws(CLIError) in try SelectCommand.relative(path, in: root) }
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        try context.printPages(.tree(directory: directory, path: path), as: TreeItem.self, empty: "nothing there") { item in
            let name = item.directory ? item.name + "/" : item.name
            let held = item.localBytes == item.bytes && item.localFiles == item.files ? "here" :
                "\(ProgressRenderer.formatBytes(item.localBytes)) here"
            return "\(item.selected == "all" ? "[x]" : item.selected == "some" ? "[-]" : "[ ]") \(name)  "
                + "\(item.files) file(s), \(ProgressRenderer.formatBytes(item.bytes)), \(held)"
        }
        return ExitCode.success
    }
}
