import Foundation
import Testing

/// Issue 45, point 2: accepting a peer's files without asking never joins its folders;
/// folders are a switch of their own.
@Suite struct AutoAcceptTests {
    @Test func withFilesOnAndFoldersOffAShareOfferWaitsForTheUser() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let receive = env.home("bob-recv")
        for name in ["docs", "photos", "bob-recv"] {
            try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true)
        }
        try "a".write(toFile: env.home("docs") + "/a.txt", atomically: true, encoding: .utf8)
        try "p".write(toFile: env.home("photos") + "/p.txt", atomically: true, encoding: .utf8)
        let alice = try DaemonProcess(env, name: "alice", environment: FolderSyncTests.environment)
        defer { alice.stop() }
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--receive-dir", receive], environment: FolderSyncTests.environment)
        defer { bob.stop() }
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")

        // The old form still means files: a file comes in without asking.
        let files = try env.cli(bob, ["auto-accept", "alice", "on", "--json"])
        try #require(files.status == 0, "\(files.stderr)")
        #expect(files.stdout.contains("\"autoAccept\":true"), "\(files.stdout)")
        try "hello".write(toFile: env.home("note.txt"), atomically: true, encoding: .utf8)
        let sent = try env.cli(alice, ["send", env.home("note.txt"), "--to", "bob"])
        #expect(sent.status == 0, "\(sent.stderr)")
        try FolderSyncTests.eventually("the file arrives unasked") { FileManager.default.fileExists(atPath: receive + "/note.txt") }

        // A folder does not: its offer waits in bob's status, nothing is placed.
        #expect(try env.cli(alice, ["share", env.home("docs"), "--with", "bob"]).status == 0)
        let offer = try bob.waitFor("share_offer", timeout: 15)
        let folderID = try #require(offer["folder"] as? String)
        let status = try env.cli(bob, ["status"])
        #expect(status.stdout.contains("syncpeer accept \(folderID)"), "\(status.stdout)")
        #expect(!FileManager.default.fileExists(atPath: receive + "/docs"), "bob joined alice's folder without being asked")

        // With folders on, the next folder is joined.
        let folders = try env.cli(bob, ["auto-accept", "alice", "folders", "on"])
        try #require(folders.status == 0, "\(folders.stderr)")
        #expect(folders.stdout.contains("shared folders are joined without asking"), "\(folders.stdout)")
        #expect(try env.cli(alice, ["share", env.home("photos"), "--with", "bob"]).status == 0)
        try FolderSyncTests.eventually("photos joined and synced") { FileManager.default.fileExists(atPath: receive + "/photos/p.txt") }
        #expect(!FileManager.default.fileExists(atPath: receive + "/docs"))

        let wrong = try env.cli(bob, ["auto-accept", "alice", "everything", "on"])
        #expect(wrong.status != 0 && wrong.stderr.contains("files or folders"), "\(wrong.stderr)")
    }
}
