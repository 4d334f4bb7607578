import Foundation
import Glibc
import Testing

/// Issue 45, point 4: `syncpeer events` tells a script what a folder sync does — the
/// folder's states, each file being pulled (path and bytes), pulled, failed, and a conflict —
/// so it need not poll `status`.
@Suite struct FolderEventsTests {
    @Test func eventsStreamAFolderSyncFileByFile() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let docs = env.home("docs"), receive = env.home("bob-recv")
        for directory in [docs + "/ro", receive] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        try TestFiles.random(docs + "/big.bin", size: 300_000)
        try "v1".write(toFile: docs + "/notes.txt", atomically: true, encoding: .utf8)
        let environment = FolderSyncTests.environment
        var alice = try DaemonProcess(env, name: "alice", environment: environment)
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--auto-accept", "--receive-dir", receive], environment: environment)
        defer { _ = alice.stop(); _ = bob.stop() }
        _ = try env.pair(alice, bob, autoAccepted: true)
        try bob.waitForState("connected", peer: "alice")
        let events = try EventsProcess(env, home: bob.home)
        defer { events.stop() }
        Thread.sleep(forTimeInterval: 0.5)   // subscribed before anything happens
        try #require(try env.cli(alice, ["share", docs, "--with", "bob"]).status == 0)
        let folder = receive + "/docs"

        // Each file: being pulled (what must come over the network, of its size), then pulled.
        try FolderSyncTests.eventually("bob's events say big.bin and notes.txt were pulled") {
            events.matching("file", ["path": "big.bin", "state": "pulled"]).count == 1
                && events.matching("file", ["path": "notes.txt", "state": "pulled"]).count == 1
        }
        let syncing = try #require(events.matching("file", ["path": "big.bin", "state": "syncing"]).first, "\(events.events)")
        #expect(syncing["bytes"] as? Int == 300_000 && syncing["total"] as? Int == 300_000, "\(syncing)")
        #expect(syncing["name"] as? String == "docs")
        #expect(events.matching("file", ["path": "big.bin", "state": "pulled"]).first?["bytes"] as? Int == 300_000)
        // The folder's own states, each change once: scanning, syncing, then idle.
        try FolderSyncTests.eventually("bob's folder says idle after syncing") {
            let states = events.matching("folder").compactMap { $0["state"] as? String }
            return states.contains("scanning") && states.firstIndex(of: "syncing").map { states[$0...].contains("idle") } == true
        }
        let states = events.matching("folder").compactMap { $0["state"] as? String }
        #expect(zip(states, states.dropFirst()).allSatisfy { $0 != $1 }, "a state is sent when it changes: \(states)")

        // A conflict: both edit while apart; bob's edit (dated 2023) loses and is kept as a copy.
        alice.stop()
        try "bob v2".write(toFile: folder + "/notes.txt", atomically: true, encoding: .utf8)
        try TestFiles.setMtime(folder + "/notes.txt", 1_700_000_000_000_000_000)
        try "alice's text".write(toFile: docs + "/notes.txt", atomically: true, encoding: .utf8)
        alice = try DaemonProcess(env, name: "alice", home: alice.home, environment: environment, listen: alice.address)
        try FolderSyncTests.eventually("bob's events report the conflict on notes.txt", timeout: 45) {
            !events.matching("file", ["path": "notes.txt", "state": "conflict"]).isEmpty
        }
        let conflict = events.matching("file", ["path": "notes.txt", "state": "conflict"])[0]
        let copy = try #require(conflict["copy"] as? String, "\(conflict)")
        #expect(copy.contains(".sync-conflict-"), "\(conflict)")
        #expect(try String(contentsOfFile: folder + "/" + copy, encoding: .utf8) == "bob v2")

        // A path bob cannot write (a read-only mount, root only) fails, with why.
        if getuid() == 0 {
            try FolderSyncTests.eventually("bob has ro") { FileManager.default.fileExists(atPath: folder + "/ro") }
            try FolderRetryTests.run("/bin/mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", folder + "/ro"])
            defer { try? FolderRetryTests.run("/bin/umount", ["-l", folder + "/ro"]) }
            try "x".write(toFile: docs + "/ro/file.txt", atomically: true, encoding: .utf8)
            try FolderSyncTests.eventually("bob's events say ro/file.txt failed") {
                !events.matching("file", ["path": "ro/file.txt", "state": "failed"]).isEmpty
            }
            let failed = events.matching("file", ["path": "ro/file.txt", "state": "failed"])[0]
            #expect((failed["reason"] as? String)?.contains("Read-only file system") == true, "\(failed)")
        }

        // Every event as docs/JSON.md lists it.
        let document = try JSONDocument()
        let common = [JSONDocument.Field(path: "event", optional: false, openObject: false),
                      JSONDocument.Field(path: "time", optional: false, openObject: false)]
        for event in events.events where ["file", "folder"].contains(event["event"] as? String) {
            let problems = document.problems(event, as: "event \(event["event"] as? String ?? "")", extra: common)
            #expect(problems.isEmpty, "\(problems)")
        }
    }
}
