import Foundation
import Testing

/// Issue 45, point 6: the completion scripts complete what each place takes — files after
/// `send `, paired peers' names (from the running daemon) after `--to `, values after
/// `--keep ` — tested by sourcing them in bash, and in zsh where it is installed.
@Suite struct CompletionTests {
    /// Sources the bash script and completes `words` (the last one being completed), in
    /// `directory`; returns COMPREPLY, one entry a line.
    static func bash(_ script: String, _ words: [String], in directory: String) throws -> [String] {
        let quoted = words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let run = try InstallTests.run("/bin/bash", ["-c", """
            cd '\(directory)' && source '\(script)'
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _syncpeer; printf '%s\\n' "${COMPREPLY[@]}"
            """])
        #expect(run.status == 0, "\(run.output)")
        return run.output.split(separator: "\n").map(String.init)
    }

    @Test func bashAndZshCompleteFilesPeersAndValues() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, bob) = try env.autoAcceptingPair()
        defer { _ = alice.stop(); _ = bob.stop() }
        let work = env.home("work")
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        try "x".write(toFile: work + "/report.pdf", atomically: true, encoding: .utf8)
        let script = env.home("syncpeer.bash")
        try env.run(["help", "--completion", "bash"]).stdout.write(toFile: script, atomically: true, encoding: .utf8)
        let binary = SyncpeerRunner.binary

        // After `send `: the files here, not the options.
        let files = try Self.bash(script, [binary, "send", ""], in: work)
        #expect(files == ["report.pdf"], "\(files)")
        // After `--to `: the paired peers' names, asked of the running daemon.
        let peers = try Self.bash(script, [binary, "--home", alice.home, "send", "report.pdf", "--to", ""], in: work)
        #expect(peers == ["bob"], "\(peers)")
        let more = try Self.bash(script, [binary, "--home", alice.home, "send", "report.pdf", "--to", "bob", "--to", "b"], in: work)
        #expect(more == ["bob"], "\(more)")
        // After `--keep `: the peers and the words resolve takes.
        let keep = try Self.bash(script, [binary, "--home", alice.home, "resolve", "report.pdf", "--keep", ""], in: work)
        #expect(Set(keep) == ["bob", "local", "remote", "both"], "\(keep)")
        // Options still after a dash; a switch's values; a free-text value gets no file names.
        #expect(try Self.bash(script, [binary, "send", "--t"], in: work) == ["--to", "--text", "--transit-relay"])
        #expect(Set(try Self.bash(script, [binary, "auto-accept", "bob", ""], in: work)) == ["files", "folders"])
        #expect(try Self.bash(script, [binary, "send", "report.pdf", "--name", ""], in: work).isEmpty)

        guard let zsh = InstallTests.which("zsh") else { return }
        // zsh: `_arguments` and `compadd` record what they were given, then each is checked.
        let zshScript = env.home("_syncpeer")
        try env.run(["help", "--completion", "zsh"]).stdout.write(toFile: zshScript, atomically: true, encoding: .utf8)
        let run = try InstallTests.run(zsh, ["-f", "-c", """
            _arguments() { print -rl -- "$@" }
            compadd() { shift $(( ${@[(i)-a]} )); print -rl -- ${(P)1} }
            _describe() { : }
            source '\(zshScript)'
            words=(syncpeer send ''); CURRENT=3; _syncpeer
            print -- ---
            words=('\(binary)' --home '\(alice.home)' send report.pdf --to ''); CURRENT=7; _syncpeer_peers
            """])
        #expect(run.status == 0, "\(run.output)")
        let parts = run.output.components(separatedBy: "---\n")
        let specs = parts.first ?? ""
        #expect(specs.contains("--to[") && specs.contains(":peer:_syncpeer_peers"), "\(specs)")
        // PATH is optional (`send --code --text TEXT` has none) and completes files.
        #expect(specs.contains("1::path:_files"), "send's PATH completes files: \(specs)")
        #expect(parts.last?.split(separator: "\n").map(String.init) == ["bob"], "\(run.output)")
    }
}
