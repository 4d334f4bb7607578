import Foundation
import Glibc
import PeerFiles
import Testing
import TestKit

/// What a power cut rolled back is replaced by the version peers hold, but never discarded:
/// the bytes the disk held go to the versions store first when they are no version known
/// here (`history` lists them as `rolled-back`, `restore` brings them back).
@Suite(.serialized, .enabled(if: PowerLossMount.available, Comment(rawValue: PowerLossMount.unavailableReason ?? "")))
struct PowerLossKeptTests {
    /// Alice's home and folder on the power-loss mount, bob's on the ordinary disk. Her user
    /// saved notes.txt long ago (durably), then saved a new version the way most programs do
    /// (a temporary file renamed over it, no fsync); alice's daemon sent it to bob.
    final class Setup {
        let env: SyncpeerRunner
        let mount: PowerLossMount
        let aliceHome: String
        var alice: DaemonProcess
        let bob: DaemonProcess
        let user: PowerLossTests.Alice
        let atBob: String
        /// The durable version and the one only bob has durably.
        let old: String, new: String

        init() throws {
            let env = try SyncpeerRunner()
            let mount = try PowerLossMount(in: env.root.path)
            let aliceHome = mount.root + "/alice"
            let alice = try PowerLossTests.daemon(env, "alice", home: aliceHome, receive: env.home("alice-recv"), boot: 0)
            let user = PowerLossTests.Alice(folder: mount.root + "/docs", seed: 46)
            try FileManager.default.createDirectory(atPath: user.folder, withIntermediateDirectories: false)
            DurableNames.syncDirectory(mount.root)
            try user.write("notes.txt", size: 3000, durable: true)
            let old = try TestFiles.hash(user.folder + "/notes.txt")
            let bob = try FolderSyncTests.Trio.daemon(env, "bob", environment: PowerLossTests.environment)
            _ = try env.pair(alice, bob, autoAccepted: true)
            try alice.waitForState("connected", peer: "bob")
            let shared = try env.cli(alice, ["share", user.folder, "--with", "bob"])
            try #require(shared.status == 0, "\(shared.stderr)")
            let atBob = env.home("bob-recv") + "/docs/notes.txt"
            try FolderSyncTests.eventually("bob has the old version") { (try? TestFiles.hash(atBob)) == old }
            try user.write("notes.txt", size: 3000)
            let new = try TestFiles.hash(user.folder + "/notes.txt")
            try FolderSyncTests.eventually("bob has the new version, and alice knows it") {
                (try? TestFiles.hash(atBob)) == new && Self.inSync(env, alice)
            }
            (self.env, self.mount, self.aliceHome, self.alice, self.bob) = (env, mount, aliceHome, alice, bob)
            (self.user, self.atBob, self.old, self.new) = (user, atBob, old, new)
        }

        static func inSync(_ env: SyncpeerRunner, _ daemon: DaemonProcess) -> Bool {
            ((try? env.cli(daemon, ["status", "--json"]).stdout) ?? "").contains("\"outOfSyncFiles\":0")
        }

        /// Alice loses power (her disk holds the old version again) and starts on a new boot.
        func cutAlice() throws {
            let address = alice.address
            alice.crash()
            try mount.cut()
            #expect(try TestFiles.hash(user.folder + "/notes.txt") == old, "the cut rolls the file back (the premise)")
            alice = try PowerLossTests.daemon(env, "alice", home: aliceHome, receive: env.home("alice-recv"), boot: 1, listen: address)
        }

        /// The content hashes of the versions of notes.txt alice's store keeps as rolled back
        /// (each restored by its ID beside the folder); nothing else under her HOME/versions
        /// but the store's chunks.
        func kept() throws -> [String] {
            let whole = FolderSyncTests.tree(aliceHome + "/versions").filter { !$0.key.hasPrefix(".chunks") && $0.value.hasPrefix("file") }.keys
            #expect(whole.isEmpty, "no whole copy beside the store: \(whole)")
            let history = try VersionsTests.json(env, alice, ["history", user.folder + "/notes.txt"])
            return try (history["versions"] as? [[String: Any]] ?? []).filter {
                $0["local"] as? Bool == true && $0["reason"] as? String == "rolled-back" && $0["held"] as? Bool == true
            }.map { version in
                let id = try #require(version["id"] as? String)
                let copy = env.home("restored-" + id)
                _ = try VersionsTests.json(env, alice, ["restore", user.folder + "/notes.txt", "--version", id, "--to", copy])
                return try TestFiles.hash(copy)
            }
        }

        func copies(_ folder: String) -> [String] {
            FolderSyncTests.tree(folder).keys.filter { $0.contains(".sync-conflict-") }.sorted()
        }

        func stop() {
            alice.crash()
            bob.crash()
            mount.unmount()
            env.cleanup()
        }
    }

    /// The power goes: the one bob holds is fetched back (as before), and the old bytes are in
    /// alice's versions store, not unlinked.
    @Test func aRolledBackFileIsKeptBeforeThePeersVersionReplacesIt() throws {
        let setup = try Setup()
        defer { setup.stop() }
        try setup.cutAlice()
        try FolderSyncTests.eventually("alice fetches the version bob holds") {
            (try? TestFiles.hash(setup.user.folder + "/notes.txt")) == setup.new
        }
        #expect(try setup.kept() == [setup.old], "the rolled-back bytes are kept in the versions store, once")
        #expect((try? TestFiles.hash(setup.atBob)) == setup.new, "bob keeps the new version")
    }

    /// As above, but bob's user has edited on (alice's folder was paused, so she knows of
    /// bob's edit but had not fetched it) when the power goes: alice's rolled-back file is
    /// older than both, so bob's edit is fetched, with no conflict (long mode, folder pull,
    /// seed 2001: it was recorded as an edit at alice, concurrent with bob's).
    @Test func aFileRolledBackUnderAPeersLaterEditTakesTheEditWithoutAConflict() throws {
        let setup = try Setup()
        defer { setup.stop() }
        let env = setup.env
        try #require(try env.cli(setup.alice, ["pause", setup.user.folder]).status == 0)
        try Data("bob edits on".utf8).write(to: URL(fileURLWithPath: setup.atBob), options: .atomic)
        let edit = try TestFiles.hash(setup.atBob)
        try FolderSyncTests.eventually("alice knows of bob's edit") {
            ((try? env.cli(setup.alice, ["status", "--json"]).stdout) ?? "").contains("\"outOfSyncFiles\":1")
        }
        try setup.cutAlice()
        try #require(try env.cli(setup.alice, ["resume-folder", setup.user.folder]).status == 0)
        try FolderSyncTests.eventually("alice fetches bob's edit") {
            (try? TestFiles.hash(setup.user.folder + "/notes.txt")) == edit && Setup.inSync(env, setup.alice)
        }
        #expect(setup.copies(setup.user.folder).isEmpty && setup.copies(env.home("bob-recv") + "/docs").isEmpty,
                "no conflict: \(setup.copies(setup.user.folder)) \(setup.copies(env.home("bob-recv") + "/docs"))")
        #expect((try? TestFiles.hash(setup.atBob)) == edit, "bob keeps his edit")
        #expect(try setup.kept() == [setup.old], "the rolled-back bytes are kept in the versions store, once")
    }
}
