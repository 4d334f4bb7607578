import Foundation
import Glibc
import Testing

/// Issue 45, point 6: messages that say what happened and what to do, without the peer's
/// local paths; and the daemon's configuration file, under the command line.
@Suite struct EverydayMessagesTests {
    @Test func aHomeNeverInitialisedAndAMissingFolderSayWhatToDo() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let fresh = env.home("fresh")
        for arguments in [["peers"], ["events"]] {
            let result = try env.run(["--home", fresh] + arguments)
            #expect(result.status == 3, "\(arguments): \(result.stderr)")
            #expect(result.stderr == "syncpeer: error: no identity in \(fresh): run 'syncpeer init' first\n", "\(arguments)")
        }
        let alice = try DaemonProcess(env, name: "alice")
        defer { alice.stop() }
        let missing = try env.cli(alice, ["share", env.home("nope"), "--with", "bob"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("\(env.home("nope")) does not exist"), "\(missing.stderr)")
        try "x".write(toFile: env.home("file.txt"), atomically: true, encoding: .utf8)
        let file = try env.cli(alice, ["share", env.home("file.txt"), "--with", "bob"])
        #expect(file.stderr.contains("is a file, not a folder"), "\(file.stderr)")
    }

    /// Root only (mounts a read-only tmpfs as bob's receive folder).
    @Test(.enabled(if: getuid() == 0, "mounts a tmpfs"))
    func anUnwritableReceiveFolderReachesTheSenderAsSuchWithoutItsPath() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let inbox = env.home("bob-inbox-private")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        try FolderRetryTests.run("/bin/mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", inbox])
        defer { try? FolderRetryTests.run("/bin/umount", ["-l", inbox]) }
        let alice = try DaemonProcess(env, name: "alice")
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--auto-accept", "--receive-dir", inbox])
        defer { _ = alice.stop(); _ = bob.stop() }
        _ = try env.pair(alice, bob, autoAccepted: true)
        try bob.waitForState("connected", peer: "alice")
        try "report".write(toFile: env.home("report.txt"), atomically: true, encoding: .utf8)
        let sent = try env.cli(alice, ["send", env.home("report.txt"), "--to", "bob"])
        #expect(sent.status == 1, "\(sent.stdout) \(sent.stderr)")
        #expect(sent.stderr.contains("bob cannot write to its receive folder: Read-only file system"), "\(sent.stderr)")
        #expect(sent.stderr.contains("--receive-dir"), "says what bob can do: \(sent.stderr)")
        #expect(!sent.stderr.contains("declined") && !sent.stderr.contains("inbox-private"), "\(sent.stderr)")
    }

    @Test func theConfigurationFileSetsDaemonOptionsAndTheCommandLineWins() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let config = env.home("config")
        try FileManager.default.createDirectory(atPath: config + "/syncpeer", withIntermediateDirectories: true)
        try "# the dashboard stays off\ngui = off\n\ninvitation-timeout = 5\n".write(toFile: config + "/syncpeer/config", atomically: true, encoding: .utf8)
        let environment = ["XDG_CONFIG_HOME": config]

        // From the file: no dashboard.
        let quiet = try DaemonProcess(env, name: "quiet", environment: environment)
        Thread.sleep(forTimeInterval: 1)
        #expect(!FileManager.default.fileExists(atPath: quiet.home + "/gui-address"), "gui = off in the file")
        #expect(quiet.stop() == 0)
        // The command line wins: a dashboard.
        let served = try DaemonProcess(env, name: "served", arguments: ["--gui", "127.0.0.1:0"], environment: environment)
        try FolderSyncTests.eventually("--gui on the command line wins over the file") {
            FileManager.default.fileExists(atPath: served.home + "/gui-address")
        }
        #expect(served.stop() == 0)

        // A line that is no option stops the daemon with the file, the line and a guess.
        try "gui = off\nrecieve-dir = /tmp\n".write(toFile: config + "/syncpeer/config", atomically: true, encoding: .utf8)
        #expect(try env.run(["--home", env.home("bad"), "init", "--name", "bad"]).status == 0)
        let bad = try env.run(["--home", env.home("bad"), "daemon", "--listen", "127.0.0.1:0", "--no-discovery"], environment: environment)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("\(config)/syncpeer/config, line 2: 'recieve-dir' is not a daemon option; did you mean 'receive-dir'?"),
                "\(bad.stderr)")
    }
}
