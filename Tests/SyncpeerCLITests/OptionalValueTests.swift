import Testing
@testable import SyncpeerCLI

/// `send --code [CODE]`: the flag alone makes a new code; a code after it (or `--code=CODE`)
/// is used; a word that is not code-shaped stays the PATH, wherever it stands.
struct OptionalValueTests {
    func parse(_ argv: [String]) throws -> ParsedArguments {
        var globals = GlobalSettings()
        var help = false
        return try ArgumentParser.parse(argv, spec: SendCommand.spec, globals: &globals, help: &help)
    }

    @Test(arguments: [
        (["photo.jpg", "--code"], nil, ["photo.jpg"]),
        (["--code", "photo.jpg"], nil, ["photo.jpg"]),
        (["--code", "7-notes.txt"], nil, ["7-notes.txt"]),
        (["--code", "./7-guitarist-revenge"], nil, ["./7-guitarist-revenge"]),
        (["photo.jpg", "--code", "7-guitarist-revenge"], "7-guitarist-revenge", ["photo.jpg"]),
        (["--code", "12-aardvark-absurd", "photo.jpg"], "12-aardvark-absurd", ["photo.jpg"]),
        (["--code=7-guitarist-revenge", "7-other-file"], "7-guitarist-revenge", ["7-other-file"]),
        (["--code", "--text", "hi"], nil, []),
    ] as [([String], String?, [String])])
    func codeTakesAnOptionalValue(_ argv: [String], _ code: String?, _ positionals: [String]) throws {
        let parsed = try parse(argv)
        #expect(parsed.flag("code"))
        #expect(parsed.value("code") == code)
        #expect(parsed.positionals == positionals)
    }

    @Test func codeGivenTwiceIsRefused() {
        #expect(throws: CLIError.usage("option --code is given more than once")) { try parse(["a", "--code", "--code=1-a-b"]) }
    }

    @Test func sendCommandUsesTheGivenCode() throws {
        let command = try SendCommand(parsing: try parse(["/etc/hostname", "--code", "7-guitarist-revenge"]))
        #expect(command.wormhole?.code == "7-guitarist-revenge")
        let fresh = try SendCommand(parsing: try parse(["--code", "/etc/hostname"]))
        #expect(fresh.wormhole != nil && fresh.wormhole?.code == nil)
    }
}
