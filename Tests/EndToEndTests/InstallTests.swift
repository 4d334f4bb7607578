import Foundation
import Testing

/// `make install` as a packager runs it: scripts/install.sh into a DESTDIR with PREFIX=/usr,
/// every file checked as its user would (the binary runs, `man -l` renders each page, bash
/// loads the completion, zsh and fish parse theirs where installed, the unit passes
/// `systemd-analyze verify` where that works here), then `make uninstall` leaves nothing.
@Suite struct InstallTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    struct Run {
        let status: Int32
        let output: String
    }

    /// Runs a program with `environment` added, both output streams together.
    static func run(_ program: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.currentDirectoryURL = repository
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }

    static func which(_ name: String) -> String? {
        ["/usr/bin", "/bin", "/usr/local/bin"].map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test func installPutsEveryFileInPlaceAndUninstallRemovesThem() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let destdir = env.home("dest")
        let vars = ["DESTDIR": destdir, "PREFIX": "/usr"]
        let installed = try Self.run("/bin/bash", ["scripts/install.sh", "install", SyncpeerRunner.binary], environment: vars)
        #expect(installed.status == 0, "\(installed.output)")
        let root = destdir + "/usr"
        let commands = try #require(String(contentsOfFile: root + "/share/syncpeer/installed-files", encoding: .utf8)
            .split(separator: "\n").map(String.init))

        // The binary runs and is the one built, stripped of its symbol table (issue 45: 88 → 63 MB).
        let version = try Self.run(root + "/bin/syncpeer", ["--version"])
        #expect(version.status == 0 && version.output.hasPrefix("syncpeer "), "\(version.output)")
        let sections = try Self.run("/usr/bin/readelf", ["-S", "-W", root + "/bin/syncpeer"])
        #expect(sections.status == 0 && sections.output.contains(".text"), "\(sections.output.prefix(300))")
        #expect(!sections.output.contains(".symtab"), "the installed binary is stripped")

        // A man page for the program and one per command, each rendered by man without warnings.
        let help = try env.run(["help"]).stdout
        let names = help.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("Commands:") }.dropFirst()
            .prefix { !$0.isEmpty }.compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(names.count >= 25 && names.contains("send") && names.contains("share"), "\(names)")
        for page in ["syncpeer"] + names.map({ "syncpeer-\($0)" }) {
            let path = root + "/share/man/man1/\(page).1"
            #expect(commands.contains("share/man/man1/\(page).1"))
            let rendered = try Self.run("/usr/bin/man", ["--warnings", "-l", path], environment: ["MANWIDTH": "80", "MANPAGER": "cat", "PAGER": "cat"])
            #expect(rendered.status == 0, "\(page): \(rendered.output)")
            #expect(!rendered.output.contains("warning"), "\(page): \(rendered.output)")
            #expect(rendered.output.contains("NAME") && rendered.output.contains("SYNOPSIS"), "\(page): \(rendered.output.prefix(400))")
        }
        let send = try Self.run("/usr/bin/man", ["-l", root + "/share/man/man1/syncpeer-send.1"], environment: ["MANWIDTH": "100", "MANPAGER": "cat"])
        #expect(send.output.contains("--to PEER") && send.output.contains("syncpeer send report.pdf --to laptop"), "\(send.output)")

        // Completions: bash loads it and completes a command and an option.
        let bashFile = root + "/share/bash-completion/completions/syncpeer"
        let completed = try Self.run("/bin/bash", ["-c", """
            source '\(bashFile)'
            COMP_WORDS=(syncpeer se); COMP_CWORD=1; _syncpeer; echo "commands: ${COMPREPLY[*]}"
            COMP_WORDS=(syncpeer send --t); COMP_CWORD=2; _syncpeer; echo "options: ${COMPREPLY[*]}"
            """])
        #expect(completed.output.contains("commands: send") && completed.output.contains("options: --to"), "\(completed.output)")
        if let zsh = Self.which("zsh") {
            let parsed = try Self.run(zsh, ["-n", root + "/share/zsh/site-functions/_syncpeer"])
            #expect(parsed.status == 0, "\(parsed.output)")
        }
        if let fish = Self.which("fish") {
            let parsed = try Self.run(fish, ["--no-execute", root + "/share/fish/vendor_completions.d/syncpeer.fish"])
            #expect(parsed.status == 0, "\(parsed.output)")
        }
        #expect(FileManager.default.fileExists(atPath: root + "/share/zsh/site-functions/_syncpeer"))
        #expect(FileManager.default.fileExists(atPath: root + "/share/fish/vendor_completions.d/syncpeer.fish"))

        // The user unit starts the installed binary's daemon.
        let unitPath = root + "/lib/systemd/user/syncpeer.service"
        let unit = try String(contentsOfFile: unitPath, encoding: .utf8)
        #expect(unit.contains("ExecStart=/usr/bin/syncpeer daemon") && unit.contains("WantedBy=default.target"), "\(unit)")
        #expect(!unit.contains("@"), "every placeholder replaced")
        // A user manager has no network-online.target: the unit must not order after it.
        #expect(!unit.contains("network-online.target"), "\(unit)")
        if let analyze = Self.which("systemd-analyze") {
            // verify resolves ExecStart on this system: point it at the DESTDIR copy.
            let probe = env.home("syncpeer.service")
            try unit.replacingOccurrences(of: "ExecStart=/usr/bin/", with: "ExecStart=\(root)/bin/")
                .replacingOccurrences(of: "man:syncpeer(1) man:syncpeer-daemon(1)", with: "man:true(1)")
                .write(toFile: probe, atomically: true, encoding: .utf8)
            let verified = try Self.run(analyze, ["verify", "--man=no", probe], environment: ["SYSTEMD_LOG_LEVEL": "warning"])
            let ours = verified.output.split(separator: "\n").filter { $0.contains("syncpeer.service") }
            #expect(ours.isEmpty, "systemd-analyze verify: \(verified.output)")
        }

        // Uninstall removes every installed file and the list.
        let removed = try Self.run("/bin/bash", ["scripts/install.sh", "uninstall"], environment: vars)
        #expect(removed.status == 0, "\(removed.output)")
        for file in commands { #expect(!FileManager.default.fileExists(atPath: root + "/" + file), "\(file) left behind") }
        #expect(!FileManager.default.fileExists(atPath: root + "/share/syncpeer/installed-files"))
    }

    /// The generated texts follow the specs: an option added to a command is in its page and
    /// in every shell's completion without anyone editing them.
    @Test func generatedTextsListEveryOption() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        for shell in ["bash", "zsh", "fish"] {
            let script = try env.run(["help", "--completion", shell])
            #expect(script.status == 0)
            for option in ["--receive-dir", "--detach", "--auto-accept", "--with"] {
                let name = shell == "fish" ? "-l " + option.dropFirst(2) : option
                #expect(script.stdout.contains(name), "\(shell) lacks \(option)")
            }
        }
        let wrong = try env.run(["help", "--completion", "tcsh"])
        #expect(wrong.status == 2 && wrong.stderr.contains("bash, zsh or fish"), "\(wrong.stderr)")
    }
}
