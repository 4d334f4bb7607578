import Testing
@testable import SyncpeerCLI

/// `syncpeer confirm DIR`: the explicit step that resumes a folder stopped to protect it.
struct ConfirmCommandTests {
    func parse(_ argv: [String]) throws(CLIError) -> ConfirmCommand {
        var globals = GlobalSettings()
        var help = false
        return try ConfirmCommand(parsing: ArgumentParser.parse(argv, spec: ConfirmCommand.spec, globals: &globals, help: &help))
    }

    @Test(arguments: [
        (["/data/photos"], "/data/photos"),
        (["/data/photos/"], "/data/photos"),
        (["/data/x/../photos"], "/data/photos"),
        (["--json", "/data/photos"], "/data/photos"),
    ])
    func parsesTheFolder(_ argv: [String], _ directory: String) throws {
        #expect(try parse(argv).directory == directory)
    }

    @Test(arguments: [
        ([String](), "'syncpeer confirm' needs DIR: a shared folder"),
        (["/a", "/b"], "unexpected argument '/b' for 'syncpeer confirm'; see 'syncpeer help confirm'"),
        (["--accept", "/a"], "unknown option '--accept' for 'syncpeer confirm'; see 'syncpeer help confirm'"),
    ])
    func rejectsBadLines(_ argv: [String], _ message: String) {
        #expect(throws: CLIError.usage(message)) { try parse(argv) }
    }

    @Test func helpListsItAndSaysWhatItDoes() async {
        let output = CapturedOutput()
        #expect(await CLI.run(["help"], environment: ["HOME": "/nonexistent-syncpeer-test"], output: output) == 0)
        #expect(output.standardOutput.contains("confirm"))
        let detail = CapturedOutput()
        #expect(await CLI.run(["help", "confirm"], environment: ["HOME": "/nonexistent-syncpeer-test"], output: detail) == 0)
        #expect(detail.standardOutput.contains("Usage: syncpeer confirm DIR"))
        #expect(detail.standardOutput.contains("unmounted disk"))
    }
}
