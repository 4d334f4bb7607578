import Testing
@testable import SyncpeerCLI

struct ArgumentParserTests {
    static let spec = CommandSpec(
        name: "demo",
        abstract: "a command for tests",
        options: [
            OptionSpec("name", .value("NAME"), help: "a name"),
            OptionSpec("peer", .repeating("HOST:PORT"), help: "peers"),
            OptionSpec("force", short: "f", help: "a flag"),
        ],
        arguments: [ArgumentSpec("PATH", help: "a path"), ArgumentSpec("MORE", help: "more", optional: true)])

    struct Case: Sendable, CustomTestStringConvertible {
        let argv: [String]
        let flags: Set<String>
        let values: [String: [String]]
        let positionals: [String]
        let home: String?
        let json: Bool
        var testDescription: String { argv.joined(separator: " ") }
    }

    @Test(arguments: [
        Case(argv: ["a"], flags: [], values: [:], positionals: ["a"], home: nil, json: false),
        Case(argv: ["--name", "x y", "a"], flags: [], values: ["name": ["x y"]], positionals: ["a"], home: nil, json: false),
        Case(argv: ["--name=x=y", "a", "b"], flags: [], values: ["name": ["x=y"]], positionals: ["a", "b"], home: nil, json: false),
        Case(argv: ["a", "--peer", "h:1", "--peer=h:2"], flags: [], values: ["peer": ["h:1", "h:2"]], positionals: ["a"], home: nil, json: false),
        Case(argv: ["-f", "a", "--json", "--home", "/tmp/h"], flags: ["force"], values: [:], positionals: ["a"], home: "/tmp/h", json: true),
        Case(argv: ["--", "--name", "-f"], flags: [], values: [:], positionals: ["--name", "-f"], home: nil, json: false),
        Case(argv: ["-"], flags: [], values: [:], positionals: ["-"], home: nil, json: false),
    ])
    func parsesValidLines(_ c: Case) throws {
        var globals = GlobalSettings()
        var help = false
        let parsed = try ArgumentParser.parse(c.argv, spec: Self.spec, globals: &globals, help: &help)
        #expect(parsed.flags == c.flags)
        #expect(parsed.values == c.values)
        #expect(parsed.positionals == c.positionals)
        #expect(globals.home == c.home)
        #expect(globals.json == c.json)
        #expect(!help)
    }

    struct Bad: Sendable, CustomTestStringConvertible {
        let argv: [String]
        let message: String
        var testDescription: String { argv.joined(separator: " ") }
    }

    @Test(arguments: [
        Bad(argv: ["--nmae", "x", "a"], message: "unknown option '--nmae' for 'syncpeer demo'; did you mean '--name'?"),
        Bad(argv: ["--zzzzzzzz", "a"], message: "unknown option '--zzzzzzzz' for 'syncpeer demo'; see 'syncpeer help demo'"),
        Bad(argv: ["-x", "a"], message: "unknown option '-x' for 'syncpeer demo'; see 'syncpeer help demo'"),
        Bad(argv: ["a", "--name"], message: "option --name needs a value (NAME)"),
        Bad(argv: ["--force=yes", "a"], message: "option --force takes no value"),
        Bad(argv: ["--name", "a", "--name", "b", "c"], message: "option --name is given more than once"),
        Bad(argv: [], message: "'syncpeer demo' needs PATH: a path"),
        Bad(argv: ["a", "b", "c"], message: "unexpected argument 'c' for 'syncpeer demo'; see 'syncpeer help demo'"),
    ])
    func rejectsBadLines(_ c: Bad) {
        var globals = GlobalSettings()
        var help = false
        #expect(throws: CLIError.usage(c.message)) {
            try ArgumentParser.parse(c.argv, spec: Self.spec, globals: &globals, help: &help)
        }
    }

    @Test func helpSkipsArgumentChecks() throws {
        var globals = GlobalSettings()
        var help = false
        _ = try ArgumentParser.parse(["--help"], spec: Self.spec, globals: &globals, help: &help)
        #expect(help)
    }

    @Test(arguments: [("kitten", "sitting", 3), ("", "abc", 3), ("same", "same", 0), ("--nmae", "--name", 2)])
    func editDistance(_ a: String, _ b: String, _ d: Int) {
        #expect(ArgumentParser.editDistance(a, b) == d)
    }

    @Test func generatedHelpListsEverything() {
        let text = HelpFormatter.help(for: Self.spec)
        #expect(text.contains("Usage: syncpeer demo [--name NAME] [--peer HOST:PORT ...] [--force] PATH [MORE]"))
        #expect(text.contains("-f, --force"))
        #expect(text.contains("--home DIR"))
        #expect(text.contains("--json"))
    }
}
