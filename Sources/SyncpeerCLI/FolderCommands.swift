internal import FoundationEssentials
internal import Glibc
internal import PeerFiles
internal import SyncEngine

/// `syncpeer share DIR --with PEER ...`: keeps a folder in sync with paired peers.
struct ShareCommand: Command {
    static let spec = CommandSpec(
        name: "share",
        abstract: "keep a folder in sync with paired peers (they accept with 'syncpeer accept FOLDER-ID')",
        discussion: """
        The folder is scanned (content-defined chunks, BLAKE3 hashes, recorded in the index),
        watched with inotify, and offered to each peer. Changes on any side propagate: new and
        edited files (only the chunks that changed travel; renames and copies move no data),
        deletions, renames, permissions. Concurrent edits keep both versions: the older
        becomes 'name.sync-conflict-YYYYMMDD-HHMMSS-DEVICE-TAG.ext' ('syncpeer conflicts').
        Patterns in .syncpeerignore at the root (globs, **, ! negation, # comments) stay
        local: the file itself is never synced, and a peer's is never applied here.
        """,
        options: [OptionSpec("with", .repeating("PEER"), help: "a paired peer to share with (repeatable)"),
                  OptionSpec("only", .repeating("PATH"), help: "hold only this subtree here (repeatable; see 'syncpeer select')"),
                  OptionSpec("versions", .value("POLICY"), help: "how long replaced versions are kept (default 'staggered 30 cap 10%'; see 'syncpeer help versions')"),
                  OptionSpec("role", .value("ROLE"), help: "our role towards those peers: both (default), send-only, receive-only",
                             values: ["both", "send-only", "receive-only"]),
                  OptionSpec("no-deletes", help: "their deletions are not applied here (an archive)")],
        arguments: [ArgumentSpec("DIR", help: "the folder to share")],
        examples: ["syncpeer share ~/Documents --with laptop", "syncpeer share ~/Photos --with bob --with carol",
                   "syncpeer share ~/Scratch --with laptop --versions 'simple 3'",
                   "syncpeer share ~/Site --with web --role send-only", "syncpeer share ~/Archive --with phone --no-deletes"])

    let directory: String
    let peers: [String]
    let only: [String]
    let versions: String?
    let role: String?
    let noDeletes: Bool

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        let root = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        directory = root
        peers = arguments.all("with")
        only = try arguments.all("only").map { path throws(CLIError) in try SelectCommand.relative(path, in: root) }
        if peers.isEmpty { throw .usage("'syncpeer share' needs --with PEER (at least one)") }
        versions = arguments.value("versions")
        if let versions, VersionPolicy(parsing: versions) == nil {
            throw .usage("'\(versions)' is not a versions policy: none, trashcan DAYS, simple N or staggered [DAYS], optionally with 'cap SIZE'")
        }
        role = arguments.value("role")
        noDeletes = arguments.flag("no-deletes")
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.share(directory: directory, peers: peers, role: role, noDeletes: noDeletes ? true : nil,
                                             only: only.isEmpty ? nil : only), as: ShareResult.self)
        if let versions { _ = try context.call(.versions(directory: directory, policy: versions), as: VersionsPolicyResult.self) }
        let names = result.peers.map(\.name).joined(separator: ", ")
        context.print(result, text: "Sharing \(directory) as folder \(result.folder) with \(names)")
        return ExitCode.success
    }
}

/// A command on one shared folder, `syncpeer NAME DIR`: sends its request with the folder's
/// absolute path to the daemon and prints `done`.
protocol SharedFolderCommand: Command {
    var directory: String { get }
    init(directory: String)
    /// The request for `directory`.
    var request: ControlRequest { get }
    /// The line printed on success.
    var done: String { get }
}

extension SharedFolderCommand {
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        self.init(directory: URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path)
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(request, as: FolderResult.self)
        context.print(result, text: done)
        return ExitCode.success
    }
}

/// `syncpeer unshare DIR`.
struct UnshareCommand: SharedFolderCommand {
    static let spec = CommandSpec(
        name: "unshare",
        abstract: "stop syncing a folder (its files stay as they are; peers are told)",
        arguments: [ArgumentSpec("DIR", help: "a shared folder")],
        examples: ["syncpeer unshare ~/Documents"])
    let directory: String
    var request: ControlRequest { .unshare(directory: directory) }
    var done: String { "No longer sharing \(directory)" }
}

/// `syncpeer pause DIR`.
struct PauseCommand: SharedFolderCommand {
    static let spec = CommandSpec(
        name: "pause",
        abstract: "pause a shared folder: no scan and no pull until 'syncpeer resume-folder' (kept across restarts)",
        arguments: [ArgumentSpec("DIR", help: "a shared folder")],
        examples: ["syncpeer pause ~/Photos"])
    let directory: String
    var request: ControlRequest { .pauseFolder(directory: directory, paused: true) }
    var done: String { "Paused \(directory): nothing is scanned or pulled until 'syncpeer resume-folder \(directory)'" }
}

/// `syncpeer resume-folder DIR`.
struct ResumeFolderCommand: SharedFolderCommand {
    static let spec = CommandSpec(
        name: "resume-folder",
        abstract: "resume a paused folder: it is scanned and pulls what it missed",
        arguments: [ArgumentSpec("DIR", help: "a paused folder")],
        examples: ["syncpeer resume-folder ~/Photos"])
    let directory: String
    var request: ControlRequest { .pauseFolder(directory: directory, paused: false) }
    var done: String { "Resumed \(directory)" }
}

/// `syncpeer confirm DIR`: adopts a stopped folder's root as it is and sends its deletions.
struct ConfirmCommand: SharedFolderCommand {
    static let spec = CommandSpec(
        name: "confirm",
        abstract: "resume a folder stopped to protect it: adopt its root as it is now and send the deletions found",
        discussion: """
        A folder stops (state error in 'syncpeer status') instead of deleting files on other
        devices when its root is missing or is another directory than the one shared (an
        unmounted disk's empty mount point, a folder moved and re-created, a marker file
        .syncpeer-folder gone or naming another folder), or when a scan finds every file gone
        at once. It resumes by itself when the right folder is back. If the change was yours
        (you moved the folder, or really deleted everything), confirm it: the folder as it is
        now becomes the shared one, and whatever its next scan finds deleted is deleted on
        every device too.
        """,
        arguments: [ArgumentSpec("DIR", help: "a shared folder")],
        examples: ["syncpeer confirm ~/Photos"])
    let directory: String
    var request: ControlRequest { .confirm(directory: directory) }
    var done: String { "Confirmed \(directory): it is rescanned as it is now, and what is gone from it is deleted on the other devices" }
}

/// `syncpeer rescan DIR [PATH]`: scans a shared folder now.
struct RescanCommand: Command {
    static let spec = CommandSpec(
        name: "rescan",
        abstract: "scan a shared folder now, or one path in it, instead of waiting for the next scan",
        discussion: """
        A folder is watched with inotify and scanned in full now and then; a change inotify
        cannot see (a network file system, a disk mounted under the folder) waits for that
        scan. rescan starts one at once, of the whole folder or only of PATH (a file or a
        folder inside it, relative to it or in full). It answers once the scan is queued:
        'syncpeer status' shows the folder scanning, then idle.
        """,
        arguments: [ArgumentSpec("DIR", help: "a shared folder"), ArgumentSpec("PATH", help: "a path inside it", optional: true)],
        examples: ["syncpeer rescan ~/Documents", "syncpeer rescan ~/Photos 2026/june"])
    let directory: String
    let path: String?
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        directory = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        guard arguments.positionals.count > 1 else {
            path = nil
            return
        }
        let given = arguments.positionals[1]
        guard given.hasPrefix("/") else {
            path = given
            return
        }
        let full = URL(fileURLWithPath: given).standardizedFileURL.path
        guard full.hasPrefix(directory + "/") else { throw .usage("\(given) is not inside \(directory)") }
        path = String(full.dropFirst(directory.count + 1))
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.rescan(directory: directory, path: path), as: FolderResult.self)
        context.print(result, text: "Rescanning \(path.map { directory + "/" + $0 } ?? directory)")
        return ExitCode.success
    }
}

/// `syncpeer verify DIR`: a scrub of a shared folder.
struct VerifyCommand: Command {
    static let spec = CommandSpec(
        name: "verify",
        abstract: "read every file of a shared folder, check it against the index, and repair what does not match",
        discussion: """
        A scan trusts a file whose size, modification time and inode have not changed. Bytes
        that changed under them (a failing disk, a program that wrote in place and put the
        time back) are found only by reading them: verify reads and hashes every file. A file
        whose bytes do not match is rebuilt from its chunks that still verify and the rest
        fetched from a connected peer that has the same version; without one it is reported
        and left as it is. Files changed since the last scan are rescanned (your edits, not
        damage). Exit status 1 when a damaged file could not be repaired.
        """,
        arguments: [ArgumentSpec("DIR", help: "a shared folder")],
        examples: ["syncpeer verify ~/Documents", "syncpeer verify ~/Photos --json"])
    let directory: String
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        directory = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.verify(directory: directory), as: VerifyResult.self)
        var lines = ["Verified \(result.files) files (\(ProgressLayout.formatBytes(result.bytes))) of \(result.path) in "
            + PlainText.format("%.1f s", result.seconds)]
        if result.changed > 0 { lines.append("\(result.changed) changed since the last scan: rescanned") }
        if result.corrupt == 0 {
            lines.append("No damage found")
        } else {
            lines.append("\(result.corrupt) damaged, \(result.repaired) repaired from peers")
            for file in result.damaged {
                lines.append(file.repaired ? "  repaired  \(file.path)" : "  DAMAGED   \(file.path): \(file.reason ?? "not repaired")")
                if let kept = file.kept { lines.append("            as it was found: version \(kept) (syncpeer restore \(result.path)/\(file.path) --version \(kept))") }
            }
            if result.damaged.count < result.corrupt { lines.append("  … and \(result.corrupt - result.damaged.count) more") }
        }
        if result.versionsDamaged > 0 {
            lines.append("\(result.versionsDamaged) of \(result.versions) kept versions damaged: no longer held here ('syncpeer history' lists them; a peer holding one can restore it)")
        } else if result.versions > 0 {
            lines.append("\(result.versions) kept versions verified")
        }
        context.print(result, text: lines.joined(separator: "\n"))
        return result.repaired == result.corrupt ? ExitCode.success : ExitCode.failure
    }
}

/// `syncpeer status [--watch]`: shared folders, per peer what is in and out of sync.
struct StatusCommand: Command {
    static let spec = CommandSpec(
        name: "status",
        abstract: "show each shared folder: state, files, what each peer still needs, conflicts, offers",
        discussion: "States: scanning, syncing, idle, retrying (some paths failed and are tried again by themselves: each is listed with why and when), error, paused ('syncpeer resume-folder'). With --watch the status is shown again every 2 s until Ctrl-C: redrawn in place on a terminal, one status after another when piped.",
        options: [OptionSpec("watch", help: "print the status again every 2 s")],
        examples: ["syncpeer status", "syncpeer status --json", "syncpeer status --watch"])
    let watch: Bool
    init(parsing arguments: ParsedArguments) throws(CLIError) { watch = arguments.flag("watch") }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        // On a terminal --watch redraws the status in place; piped, each one follows the
        // last after a blank line.
        let inPlace = watch && context.output.isTerminal && !context.globals.json
        var drawn = 0
        while true {
            if inPlace {
                var result = FoldersResult(folders: [], offers: [])
                try Self.eachPage(context) { page in
                    result.folders += page.folders
                    result.offers += page.offers
                }
                let page = CapturedOutput()
                show(result, page)
                let width = ProgressRenderer.terminalWidth()
                let lines = page.standardOutput.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                    .map { ProgressLayout.shorten(String($0), max(10, width - 1)) }
                let up = drawn > 0 ? "\u{1b}[\(drawn)A" : ""
                context.output.out("\r" + up + "\u{1b}[J" + lines.joined(separator: "\n") + "\n")
                drawn = lines.count
            } else {
                var first = true
                try Self.eachPage(context) { page in
                    if context.globals.json { context.output.json(page) } else { show(page, context.output, first: first) }
                    first = false
                }
            }
            guard watch else { return ExitCode.success }
            try? await Task.sleep(for: .seconds(2))
            if !context.globals.json && !inPlace { context.output.line("") }
        }
    }

    /// Which of two names that look the same this is.
    static func form(of name: String) -> String {
        if UnicodeForms.nfc(name).utf8.elementsEqual(name.utf8) { return "composed, NFC" }
        if UnicodeForms.nfd(name).utf8.elementsEqual(name.utf8) { return "decomposed, NFD" }
        return "mixed"
    }

    /// The status page after page, as it comes: the folders (the first page with the first
    /// share offers), then the rest of the offers in pages of their own (no folders).
    static func eachPage(_ context: CommandContext, _ each: (FoldersResult) -> Void) throws(CLIError) {
        let client = try context.client()
        var offersNext: String?
        try context.eachPage(.folders, as: FoldersResult.self, client: client) { page in
            offersNext = page.offersNext ?? offersNext
            each(page)
        }
        guard let offersNext else { return }
        try context.eachPage(.offers, as: [ShareOfferInfo].self, client: client, after: offersNext) { offers in
            each(FoldersResult(folders: [], offers: offers))
        }
    }

    /// Prints one page of the status (`first`: the page that says when there is no folder).
    func show(_ result: FoldersResult, _ output: any OutputSink, first: Bool = true) {
        if first && result.folders.isEmpty { output.line("no shared folders: share one with 'syncpeer share DIR --with PEER'") }
        for folder in result.folders {
            var line = "\(folder.label) (\(folder.folder))  \(folder.state.rawValue)  \(folder.files) files, \(ProgressRenderer.formatBytes(folder.bytes))  \(folder.path)"
            if folder.conflicts > 0 { line += "  \(folder.conflicts) conflict(s)" }
            output.line(line)
            if let error = folder.error { output.line("  error: \(error)") }
            if folder.notApplied > 0 {
                output.line("  \(folder.notApplied) remote change(s) not applied here (send-only, no-deletes): "
                            + "'syncpeer changes \(folder.path)' lists them, 'syncpeer override \(folder.path)' sends ours back")
            }
            if folder.locallyChanged > 0 {
                output.line("  \(folder.locallyChanged) path(s) locally changed, not sent to receive-only peers: "
                            + "'syncpeer changes \(folder.path)' lists them, 'syncpeer revert \(folder.path)' takes the cluster's version")
            }
            if folder.failing > 0 {
                output.line("  \(folder.failing) path(s) cannot be pulled now:")
                for item in folder.failures {
                    output.line("    \(item.path): \(item.reason) (\(item.retry))")
                }
                if folder.failing > folder.failures.count { output.line("    and \(folder.failing - folder.failures.count) more") }
            }
            if folder.damaged > 0 {
                output.line("  \(folder.damaged) file(s) damaged on disk (their bytes no longer match the index), not served; "
                            + "'syncpeer verify \(folder.path)' repairs them from a peer that has them:")
                for path in folder.damagedPaths { output.line("    \(path)") }
                if folder.damaged > folder.damagedPaths.count { output.line("    and \(folder.damaged - folder.damagedPaths.count) more") }
            }
            if folder.normalizationTwins > 0 {
                output.line("  \(folder.normalizationTwins) name(s) equal another of their folder under Unicode normalization"
                            + " (both kept and synced; a file system that normalizes names holds only one):")
                for name in folder.normalizationTwinNames { output.line("    \(name)  (\(Self.form(of: name)))") }
                let more = folder.normalizationTwins - folder.normalizationTwinNames.count
                if more > 0 { output.line("    and \(more) more") }
            }
            for peer in folder.peers {
                let connected = peer.connected
                    ? "connected" + (PathText.describe(path: peer.path, roundTripMs: peer.roundTripMs).map { " (\($0))" } ?? "")
                    : "not connected"
                let moved = peer.receivedBytes + peer.sentBytes > 0
                    ? "  ↓ \(ProgressRenderer.formatBytes(peer.receivedBytes)) ↑ \(ProgressRenderer.formatBytes(peer.sentBytes))"
                    : ""
                let differ = peer.outOfSyncFiles > 0
                    ? "  (\(peer.outOfSyncFiles) files, \(ProgressRenderer.formatBytes(peer.outOfSyncBytes)) differ)" : ""
                let role = (peer.role == "both" ? "" : "  " + peer.role) + (peer.noDeletes ? "  no-deletes" : "")
                let holds = peer.holds.isEmpty ? "" : "  holds only " + peer.holds.joined(separator: ", ")
                output.line("  \(EventRenderer.peerName(peer.peer))  \(connected)  \(peer.percent)% in sync" + differ + moved + role + holds)
            }
            for item in folder.transfers {
                let peers = item.peers.map(\.name).joined(separator: ", ")
                output.line("  ↓ \(item.path)  \(item.percent)%  \(ProgressRenderer.formatBytes(item.fetched)) of \(ProgressRenderer.formatBytes(item.needed)) from \(peers)")
            }
        }
        for offer in result.offers {
            if let joins = offer.joins {
                output.line("offer: \(EventRenderer.peerName(offer.peer)) asks to join your folder \(joins) (it would get your copy) — 'syncpeer accept \(offer.folder)'")
            } else {
                output.line("offer: \(EventRenderer.peerName(offer.peer)) shares '\(offer.label)' — 'syncpeer accept \(offer.folder) [--into DIR]'")
            }
        }
    }
}

/// `syncpeer conflicts`.
struct ConflictsCommand: Command {
    static let spec = CommandSpec(
        name: "conflicts",
        abstract: "list files edited on two devices at once, with each device's version",
        discussion: """
        Each conflicted file is listed with its versions: the file itself and its conflict
        copies, each with the device that wrote it, its size and modification time.
        'syncpeer resolve FILE --keep DEVICE' keeps that device's version.
        """,
        examples: ["syncpeer conflicts", "syncpeer conflicts --json"])
    init(parsing arguments: ParsedArguments) throws(CLIError) {}
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        try context.printPages(.conflicts, as: ConflictInfo.self, empty: "no conflicts") { item in
            var lines = [item.original]
            for version in item.versions {
                let author = version.local ? "\(version.name) (this device)" : version.name == "?" ? version.device : version.name
                let place = version.path == item.original ? "the file" : PathName.lastComponent(version.path)
                lines.append("  \(author)'s  \(ProgressRenderer.formatBytes(version.size))  \(Self.localTime(version.time))  \(place)")
            }
            if let more = item.moreVersions { lines.append("  and \(more) more version(s)") }
            let names = Set(item.versions.map { $0.name == "?" ? $0.device : $0.name })
            lines.append("  keep one: syncpeer resolve \(item.original) --keep \(names.sorted().joined(separator: "|"))|both")
            return lines.joined(separator: "\n")
        }
        return ExitCode.success
    }

    /// "2026-12-05 18:01:02", local time.
    static func localTime(_ milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "?" }
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// `syncpeer resolve PATH --keep DEVICE|both`.
struct ResolveCommand: Command {
    static let spec = CommandSpec(
        name: "resolve",
        abstract: "settle a conflict: keep one device's version of a file, or every version",
        discussion: """
        DEVICE is a peer's name or device-ID prefix, or 'local' (or this device's name) for
        the version this device wrote: the version is chosen by who wrote it, never by
        where it lies ('syncpeer conflicts' lists them). 'remote' is the other device's
        version when exactly one other device wrote one. That version stays at PATH; every
        other version is moved to HOME/versions/FOLDER-ID/ (named as its conflict copy,
        with its time and device): nothing is deleted, copy it back to recover it. both:
        the copies get ordinary names ('name (1).ext'). Every device follows.
        """,
        options: [OptionSpec("keep", .value("DEVICE|both"), help: "whose version stays: a peer name or ID prefix, local, remote, or both",
                             values: ["local", "remote"])],
        arguments: [ArgumentSpec("PATH", help: "the file that has conflict copies")],
        examples: ["syncpeer resolve ~/Documents/report.txt --keep alice", "syncpeer resolve ~/Documents/report.txt --keep local",
                   "syncpeer resolve ~/Documents/report.txt --keep both"])
    let path: String
    let keep: String
    init(parsing arguments: ParsedArguments) throws(CLIError) {
        path = URL(fileURLWithPath: arguments.positionals[0]).standardizedFileURL.path
        guard let keep = arguments.value("keep"), !keep.isEmpty else {
            throw .usage("'syncpeer resolve' needs --keep DEVICE (a peer name or ID prefix, local, remote) or both; see 'syncpeer conflicts'")
        }
        self.keep = keep
    }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let result = try context.call(.resolve(path: path, keep: keep), as: ResolveResult.self)
        var text = result.kept == "both" ? "Resolved \(path): kept every version"
                                         : "Resolved \(path): kept \(result.name ?? result.kept)'s version"
        for kept in result.versions { text += "\n  the other version is kept as \(kept): syncpeer restore \(path) --version \(kept)" }
        context.print(result, text: text)
        return ExitCode.success
    }
}
