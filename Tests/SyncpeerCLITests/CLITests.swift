import Testing
@testable import SyncpeerCLI

/// The dispatcher, in process: command lookup, global options, suggestions, help.
struct CLITests {
    func run(_ argv: [String], env: [String: String] = ["HOME": "/nonexistent-syncpeer-test"]) async -> (Int32, CapturedOutput) {
        let output = CapturedOutput()
        let code = await CLI.run(argv, environment: env, output: output)
        return (code, output)
    }

    @Test func versionPrintsVersion() async {
        let (code, out) = await run(["--version"])
        #expect(code == 0)
        #expect(out.standardOutput == "syncpeer \(CLI.version)\n")
    }

    @Test func unknownCommandSuggests() async {
        let (code, out) = await run(["inti"])
        #expect(code == ExitCode.usage)
        #expect(out.standardError == "syncpeer: error: unknown command 'inti'; did you mean 'init'?\n")
    }

    @Test func unknownGlobalOptionSuggests() async {
        let (code, out) = await run(["--jsno", "id"])
        #expect(code == ExitCode.usage)
        #expect(out.standardError == "syncpeer: error: unknown option '--jsno'; did you mean '--json'?\n")
    }

    @Test func noCommandShowsOverviewAndFails() async {
        let (code, out) = await run([])
        #expect(code == ExitCode.usage)
        #expect(out.standardOutput.contains("Commands:"))
    }

    @Test(arguments: CLI.commands.map { $0.spec.name })
    func everyCommandHasHelpWithExamples(_ name: String) async {
        let (code, out) = await run(["help", name])
        #expect(code == 0)
        #expect(out.standardOutput.hasPrefix("syncpeer \(name) — "))
        #expect(out.standardOutput.contains("Examples:\n  syncpeer"))
        let (code2, out2) = await run([name, "--help"])
        #expect(code2 == 0)
        #expect(out2.standardOutput == out.standardOutput)
    }

    @Test func overlongNameIsAUsageError() async {
        let (code, out) = await run(["--home", "/nonexistent-syncpeer-test", "init", "--name", String(repeating: "é", count: 32)])
        #expect(code == ExitCode.usage)
        #expect(out.standardError == "syncpeer: error: invalid display name: it is 64 bytes of UTF-8; at most 63 are allowed\n")
    }
}
