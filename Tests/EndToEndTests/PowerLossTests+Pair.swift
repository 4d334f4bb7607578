import Foundation
import TestKit

extension PowerLossTests {
    /// alice's daemon on the ordinary disk and bob's with his home and receive folder on a
    /// power-loss mount, paired (auto-accepting), alice's `folder` shared with bob; bob loses
    /// power with `cut` and starts again (a new boot) with `restart`.
    final class Pair {
        let env: SyncpeerRunner
        let mount: PowerLossMount
        let alice: DaemonProcess
        var bob: DaemonProcess
        let bobHome: String, bobReceive: String
        private var boot = 0
        private var address: String

        init(_ env: SyncpeerRunner, sharing folder: String) throws {
            self.env = env
            mount = try PowerLossMount(in: env.root.path)
            alice = try FolderSyncTests.Trio.daemon(env, "alice", environment: PowerLossTests.environment)
            // bob's daemon makes his home and receive folder itself (and must make them durable).
            bobHome = mount.root + "/bob"
            bobReceive = mount.root + "/bob-recv"
            bob = try PowerLossTests.daemon(env, "bob", home: bobHome, receive: bobReceive, boot: boot)
            address = bob.address
            _ = try env.pair(alice, bob, autoAccepted: true)
            try alice.waitForState("connected", peer: "bob")
            let shared = try env.cli(alice, ["share", folder, "--with", "bob"])
            guard shared.status == 0 else { throw PairError(reason: "share failed: \(shared.stderr)") }
            // The runs delete and rename many files at once: the mass-change guard (issue 41.5)
            // would hold such a change for a user; what survives a cut is what they check.
            try guardOff(alice, folder)
            let bobsFolder = bobFolder(folder)
            try FolderSyncTests.eventually("bob joins the folder") { FileManager.default.fileExists(atPath: bobsFolder) }
            try FolderSyncTests.eventually("bob's guard is off") { (try? self.guardOff(self.bob, bobsFolder)) != nil }
        }

        private func guardOff(_ daemon: DaemonProcess, _ path: String) throws {
            let off = try env.cli(daemon, ["guard", path, "--percent", "0", "--files", "0"])
            guard off.status == 0 else { throw PairError(reason: "guard failed: \(off.stderr)") }
        }

        struct PairError: Error {
            let reason: String
        }

        /// Bob's folder (alice's folder as he receives it).
        func bobFolder(_ folder: String) -> String { bobReceive + "/" + (folder as NSString).lastPathComponent }

        /// Bob loses power: killed, then everything not durable undone (half the time only a
        /// random prefix of it, as `rng` chooses). Prints what was lost, with `label`.
        func cut(_ label: String, using rng: inout SplitMix64) throws {
            address = bob.address
            bob.crash()
            let partial: UInt64? = Bool.random(using: &rng) ? UInt64.random(in: 1...1_000_000, using: &rng) : nil
            let counts = try mount.cut(seed: partial)
            print("powerloss: \(label): \(counts["lost"] ?? "?") changes lost (prefix seed \(partial.map(String.init) ?? "none"))")
        }

        /// Bob starts again after a cut, on a new boot, at his address.
        func restart() throws {
            boot += 1
            bob = try PowerLossTests.daemon(env, "bob", home: bobHome, receive: bobReceive, boot: boot, listen: address)
        }

        func stop() {
            bob.crash()
            alice.crash()
            mount.unmount()
        }
    }
}
