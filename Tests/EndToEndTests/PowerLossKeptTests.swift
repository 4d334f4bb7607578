import Foundation
import Glibc
import PeerFiles
import Testing
import TestKit

/// What a power cut rolled back is replaced by the version peers hold, but never discarded:
/// the bytes the disk held go to HOME/versions first when they are no version known here.
@Suite(.serialized, .enabled(if: PowerLossMount.available, Comment(rawValue: PowerLossMount.unavailableReason ?? "")))
struct PowerLossKeptTests {
    /// Alice's home and folder are on the power-loss mount. Her user saved notes.txt long ago
    /// (durably), then saved a new version the way most programs do (a temporary file renamed
    /// over it, no fsync); alice's daemon sent it to bob, and the power went. Her disk holds
    /// the old version again: the one bob holds is fetched back (as before), and the old
    /// bytes are in alice's HOME/versions, not unlinked.
    @Test func aRolledBackFileIsKeptBeforeThePeersVersionReplacesIt() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let mount = try PowerLossMount(in: env.root.path)
        let aliceHome = mount.root + "/alice"
        var alice = try PowerLossTests.daemon(env, "alice", home: aliceHome, receive: env.home("alice-recv"), boot: 0)
        defer {
            alice.crash()
            mount.unmount()
        }
        let user = PowerLossTests.Alice(folder: mount.root + "/docs", seed: 46)
        try FileManager.default.createDirectory(atPath: user.folder, withIntermediateDirectories: false)
        DurableNames.syncDirectory(mount.root)
        try user.write("notes.txt", size: 3000, durable: true)
        let old = try TestFiles.hash(user.folder + "/notes.txt")
        let bob = try FolderSyncTests.Trio.daemon(env, "bob", environment: PowerLossTests.environment)
        defer { bob.crash() }
        _ = try env.pair(alice, bob, autoAccepted: true)
        try alice.waitForState("connected", peer: "bob")
        let shared = try env.cli(alice, ["share", user.folder, "--with", "bob"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let atBob = env.home("bob-recv") + "/docs/notes.txt"
        try FolderSyncTests.eventually("bob has the old version") { (try? TestFiles.hash(atBob)) == old }

        try user.write("notes.txt", size: 3000)
        let new = try TestFiles.hash(user.folder + "/notes.txt")
        try FolderSyncTests.eventually("bob has the new version, and alice knows it") {
            (try? TestFiles.hash(atBob)) == new
                && ((try? env.cli(alice, ["status", "--json"]).stdout) ?? "").contains("\"outOfSyncFiles\":0")
        }
        let address = alice.address
        alice.crash()
        try mount.cut()
        #expect(try TestFiles.hash(user.folder + "/notes.txt") == old, "the cut rolls the file back (the premise)")
        alice = try PowerLossTests.daemon(env, "alice", home: aliceHome, receive: env.home("alice-recv"), boot: 1, listen: address)

        try FolderSyncTests.eventually("alice fetches the version bob holds") { (try? TestFiles.hash(user.folder + "/notes.txt")) == new }
        let kept = FolderSyncTests.tree(aliceHome + "/versions").filter { $0.value.hasPrefix("file") }
        #expect(kept.values.contains { $0.hasSuffix(" " + old) }, "the rolled-back bytes are kept in HOME/versions: \(kept)")
        #expect(kept.keys.allSatisfy { $0.contains("notes.sync-conflict-") }, "named as a conflict copy of notes.txt: \(kept.keys)")
        #expect((try? TestFiles.hash(atBob)) == new, "bob keeps the new version")
    }
}
