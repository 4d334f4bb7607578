import Testing
@testable import SyncpeerCLI

/// The daemon's configuration file, parsed and merged in process (nothing is started).
struct DaemonConfigFileTests {
    func parse(_ text: String) throws(CLIError) -> ParsedArguments {
        try DaemonConfigFile.parse(text, path: "/c", spec: DaemonCommand.spec, home: "/home/u")
    }

    @Test func linesBecomeOptions() throws {
        let parsed = try parse("# a comment\n\n  receive-dir = ~/Inbox  \npeer = a:1\npeer = b:2\ninvisible = true\nno-discovery = false\n")
        #expect(parsed.values["receive-dir"] == ["/home/u/Inbox"])
        #expect(parsed.values["peer"] == ["a:1", "b:2"])
        #expect(parsed.flags == ["invisible"])
    }

    @Test(arguments: [
        ("listen 1.2.3.4:5", "/c, line 1: expected 'name = value', got 'listen 1.2.3.4:5'"),
        ("invisible = yes", "/c, line 1: invisible takes true or false, got 'yes'"),
        ("config = /x", "/c, line 1: a configuration file cannot name another ('config')"),
        ("\nlisen = x", "/c, line 2: 'lisen' is not a daemon option; did you mean 'listen'? (see 'syncpeer help daemon')"),
    ])
    func badLinesNameTheLine(text: String, message: String) {
        #expect(throws: CLIError.usage(message)) { try parse(text) }
    }

    @Test func theCommandLineWins() throws {
        var commandLine = ParsedArguments()
        commandLine.values["peer"] = ["c:3"]
        commandLine.values["listen"] = ["127.0.0.1:0"]
        let merged = DaemonConfigFile.merge(file: try parse("peer = a:1\npeer = b:2\ngui = off\nlisten = [::]:1"), commandLine: commandLine)
        #expect(merged.values["peer"] == ["c:3"] && merged.values["listen"] == ["127.0.0.1:0"] && merged.values["gui"] == ["off"])
    }

    @Test func thePathFollowsXDG() {
        #expect(DaemonConfigFile.path(explicit: nil, environment: ["XDG_CONFIG_HOME": "/x", "HOME": "/h"])?.path == "/x/syncpeer/config")
        #expect(DaemonConfigFile.path(explicit: nil, environment: ["HOME": "/h"])?.path == "/h/.config/syncpeer/config")
        #expect(DaemonConfigFile.path(explicit: "none", environment: ["HOME": "/h"]) == nil)
        #expect(DaemonConfigFile.path(explicit: "/f", environment: [:])?.required == true)
    }
}
