internal import FoundationEssentials
internal import Glibc
internal import SyncEngine

/// `syncpeer history PATH`: the versions of a file (or of everything under a folder path)
/// kept on this device and on connected peers.
struct HistoryCommand: Command {
    static let spec = CommandSpec(
        name: "history",
        abstract: "list the versions of a file or folder path kept on this device and on connected peers",
        discussion: """
        A device keeps the version it loses when a peer's edit, deletion or rename replaces a
        file there, and records what it finds overwritten or deleted locally (its content
        is held if the versions store still has its chunks). PATH is a path inside a shared
        folder as on disk, present or deleted; for a folder path every version under it is
        listed. Each version shows who keeps it, when it was replaced, its size, who wrote it
        and its ID for 'syncpeer restore --version'. At most 1,000 versions per device.
        """,
        arguments: [ArgumentSpec("PATH", help: "a file or folder path inside a shared folder")],
        examples: ["syncpeer history ~/Documents/report.txt", "syncpeer history ~/Documents/old-project --json"])
    let path: String
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        path = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.history(path: path), as: HistoryResult.self)
        var lines: [String] = []
        if result.versions.isEmpty { lines.append("No versions of \(result.path) are kept here or on connected peers") }
        for version in result.versions {
            let author = version.changedByName ?? version.changedBy
            let holder = version.local ? "here" : version.deviceName
            lines.append("\(version.id)  \(ConflictsCommand.localTime(version.keptAt))  \(ProgressLayout.formatBytes(version.size))  "
                + "\(version.path)  by \(author), \(version.reason), kept \(holder)\(version.held ? "" : " (content not held)")")
        }
        lines.append("Asked \(result.peersAsked) connected peer(s), \(result.peersAnswered) answered\(result.truncated ? "; the list stopped at its bound: ask for a narrower path" : "")")
        context.print(result, text: lines.joined(separator: "\n"))
        return ExitCode.success
    }
}

/// `syncpeer restore PATH [--at TIME | --version ID] [--to NEWPATH]`.
struct RestoreCommand: Command {
    static let spec = CommandSpec(
        name: "restore",
        abstract: "bring back a version of a file, or a deleted folder tree, from this device or a peer",
        discussion: """
        Without options the newest kept version of PATH (of each file under it, for a folder
        path) comes back. --at TIME brings back what was there at TIME (the version replaced
        after it and not modified after it): 'YYYY-MM-DD HH:MM[:SS]' local time, an ISO 8601 time, or a span
        ago such as 90s, 10m, 2h, 3d. --version ID takes one version from 'syncpeer history'.
        Chunks come from this device's versions store or from a connected peer that holds
        them, each one verified. What is at the target is kept as a version first; the
        restored file is a new local change that syncs to every peer. --to writes it
        elsewhere instead (for a folder path, the folder it goes to). Chunks come from the
        devices that hold them several at a time; on a terminal a line shows the progress of
        the whole restore, and --json prints it as 'transfer' events before the result.
        """,
        options: [OptionSpec("at", .value("TIME"), help: "restore what was there at TIME"),
                  OptionSpec("version", .value("ID"), help: "restore this version (an ID from 'syncpeer history')"),
                  OptionSpec("to", .value("NEWPATH"), help: "write it here instead of at PATH")],
        arguments: [ArgumentSpec("PATH", help: "a file or folder path inside a shared folder, present or deleted")],
        examples: ["syncpeer restore ~/Documents/report.txt", "syncpeer restore ~/Documents/old-project --at '2026-12-05 09:00'",
                   "syncpeer restore ~/Documents/report.txt --version ABCDEFG-12 --to ~/report-before.txt"])
    let path: String
    let at: Int64?
    let version: String?
    let to: String?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        path = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        version = arguments.value("version")
        to = arguments.value("to").map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        if let text = arguments.value("at") {
            guard let ms = Self.parseTime(text, now: Date()) else {
                throw .usage("'\(text)' is not a time: 'YYYY-MM-DD HH:MM[:SS]', an ISO 8601 time, or a span ago such as 10m, 2h, 3d")
            }
            at = ms
        } else {
            at = nil
        }
        if at != nil, version != nil { throw .usage("'syncpeer restore' takes --at or --version, not both") }
    }

    /// TIME as unix ms: local "YYYY-MM-DD HH:MM[:SS]", ISO 8601, or "N{s,m,h,d}" ago.
    static func parseTime(_ text: String, now: Date) -> Int64? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        if let unit = text.last.flatMap({ units[$0] }), let n = Double(text.dropLast()), n >= 0 {
            return Int64((now.timeIntervalSince1970 - n * unit) * 1000)
        }
        if let date = try? Date(text, strategy: .iso8601) { return Int64(date.timeIntervalSince1970 * 1000) }
        return localTime(text).map { $0 * 1000 }
    }

    /// "YYYY-MM-DD HH:MM[:SS]", "YYYY-MM-DDTHH:MM:SS" or "YYYY-MM-DD" (midnight) in the
    /// system's time zone (TZ, /etc/localtime), as unix seconds; nil for anything else or a
    /// day or time that does not exist.
    static func localTime(_ text: String) -> Int64? {
        func numbers(_ part: Substring, _ separator: Character) -> [Int32]? {
            let fields = part.split(separator: separator, omittingEmptySubsequences: false)
            guard fields.allSatisfy({ !$0.isEmpty && $0.count <= 4 && $0.allSatisfy { $0.isASCII && $0.isNumber } }) else { return nil }
            return fields.map { Int32($0)! }
        }
        let split = text.firstIndex { $0 == " " || $0 == "T" }
        guard let day = numbers(text[..<(split ?? text.endIndex)], "-"), day.count == 3 else { return nil }
        var time: [Int32] = [0, 0, 0]
        if let split {
            guard let clock = numbers(text[text.index(after: split)...], ":"),
                  clock.count == 3 || (clock.count == 2 && text[split] == " ") else { return nil }
            time = clock + (clock.count == 2 ? [0] : [])
        }
        var fields = tm()
        (fields.tm_year, fields.tm_mon, fields.tm_mday) = (day[0] - 1900, day[1] - 1, day[2])
        (fields.tm_hour, fields.tm_min, fields.tm_sec, fields.tm_isdst) = (time[0], time[1], time[2], -1)
        let seconds = mktime(&fields)
        // mktime carries what overflows (31 February is 3 March, 02:30 in a spring-forward gap
        // is 03:30): such a day or time does not exist.
        guard seconds != -1, fields.tm_mon == day[1] - 1, fields.tm_mday == day[2],
              (fields.tm_hour, fields.tm_min, fields.tm_sec) == (time[0], time[1], time[2]) else { return nil }
        return Int64(seconds)
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let line = RestoreProgressLine(context)
        defer { line.end() }
        let result = try context.call(.restore(path: path, at: at, version: version, to: to), as: RestoreResult.self,
                                      onEvent: line.show)
        line.end()
        var lines = result.restored.map { "restored \($0.path) (\(ProgressLayout.formatBytes($0.bytes)), version \($0.version), from \($0.from))" }
        lines += result.failed.map { "NOT restored \($0.path): \($0.reason)" }
        context.print(result, text: lines.joined(separator: "\n"))
        return result.failed.isEmpty ? ExitCode.success : ExitCode.failure
    }
}

/// `syncpeer versions DIR [POLICY]`.
struct VersionsCommand: Command {
    static let spec = CommandSpec(
        name: "versions",
        abstract: "show or set how long a shared folder keeps the versions it replaces",
        discussion: """
        POLICY: none; trashcan DAYS (each version DAYS days); simple N (the N newest of each
        file); staggered [DAYS] (one per 30 s for the first hour, one per hour for a day, one
        per day for 30 days, one per week up to DAYS, default 30). Each may end with
        'cap SIZE': bytes (K, M, G, T) or a share of the file system ('10%'); beyond it the
        oldest versions go. A new share keeps 'staggered 30 cap 10%'. Expiry runs in the
        background. Versions are chunks in HOME/versions/.chunks, shared between versions.
        """,
        arguments: [ArgumentSpec("DIR", help: "a shared folder"),
                    ArgumentSpec("POLICY", help: "the new policy (quote it: 'simple 5')", optional: true, repeating: true)],
        examples: ["syncpeer versions ~/Documents", "syncpeer versions ~/Documents 'simple 10'",
                   "syncpeer versions ~/Photos 'staggered 90 cap 20G'", "syncpeer versions ~/Scratch none"])
    let directory: String
    let policy: String?
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        directory = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        let words = arguments.positionals.dropFirst()
        policy = words.isEmpty ? nil : words.joined(separator: " ")
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.versions(directory: directory, policy: policy), as: VersionsPolicyResult.self)
        context.print(result, text: "\(result.path): versions '\(result.policy)'; \(result.versions) kept; the store holds "
            + ProgressLayout.formatBytes(result.storeBytes))
        return ExitCode.success
    }
}
