import Foundation
import Glibc
import PeerFiles
import Testing

/// Folder sync between three real daemons on 127.0.0.1: alice shares a folder with bob and
/// carol (who accept automatically); every change anywhere reaches everyone.
@Suite(.serialized)
struct FolderSyncTests {
    static let environment = ["SYNCPEER_WATCH_DELAY_MS": "200", "SYNCPEER_RESCAN_MS": ProcessInfo.processInfo.environment["TEST_RESCAN_MS"] ?? "3000"]

    final class Trio {
        let env: SyncpeerRunner
        var alice: DaemonProcess
        var bob: DaemonProcess
        var carol: DaemonProcess
        let folders: [String: String]
        let environment: [String: String]

        /// `aliceOnly`: knobs for alice alone (a slow uplink).
        init(environment: [String: String] = FolderSyncTests.environment, aliceOnly: [String: String] = [:]) throws {
            env = try SyncpeerRunner()
            self.environment = environment
            for name in ["alice", "bob", "carol"] {
                try FileManager.default.createDirectory(atPath: env.home("\(name)-recv"), withIntermediateDirectories: true)
            }
            let shared = env.home("alice-docs")
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
            alice = try Self.daemon(env, "alice", environment: environment.merging(aliceOnly) { $1 })
            bob = try Self.daemon(env, "bob", environment: environment)
            carol = try Self.daemon(env, "carol", environment: environment)
            _ = try env.pair(alice, bob, autoAccepted: true)
            _ = try env.pair(alice, carol, autoAccepted: true)
            try alice.waitForState("connected", peer: "bob")
            try alice.waitForState("connected", peer: "carol")
            folders = ["alice": shared, "bob": env.home("bob-recv") + "/alice-docs", "carol": env.home("carol-recv") + "/alice-docs"]
        }

        /// A node's daemon: auto-accepting, receiving into `<name>-recv`.
        static func daemon(_ env: SyncpeerRunner, _ name: String, environment: [String: String],
                           home: String? = nil, listen: String = "127.0.0.1:0") throws -> DaemonProcess {
            try DaemonProcess(env, name: name, home: home, arguments: ["--auto-accept", "--receive-dir", env.home("\(name)-recv")],
                              environment: environment, listen: listen)
        }

        /// Starts a stopped (or killed) node again, with its home and address.
        func restart(_ daemon: DaemonProcess) throws -> DaemonProcess {
            try Self.daemon(env, daemon.name, environment: environment, home: daemon.home, listen: daemon.address)
        }

        func share() throws {
            let result = try env.cli(alice, ["share", folders["alice"]!, "--with", "bob", "--with", "carol"])
            try #require(result.status == 0, "\(result.stderr)")
        }

        var all: [String] { ["alice", "bob", "carol"] }
        func path(_ node: String, _ relative: String) -> String { folders[node]! + "/" + relative }
    }

    /// Relative path → (kind, content hash or link target, mode) for everything below `root`
    /// (the staging and temporary names and the root's marker file excluded).
    static func tree(_ root: String) -> [String: String] {
        var out: [String: String] = [:]
        guard let walker = FileManager.default.enumerator(atPath: root) else { return out }
        while let relative = walker.nextObject() as? String {
            if relative.hasSuffix(".syncpeer-tmp") || relative.contains(".syncpeer-partial") || relative == ".syncpeer-folder" { continue }
            let full = root + "/" + relative
            var st = stat()
            guard lstat(full, &st) == 0 else { continue }
            let mode = String(st.st_mode & 0o777, radix: 8)
            switch st.st_mode & S_IFMT {
            case S_IFDIR: out[relative] = "dir \(mode)"
            case S_IFLNK: out[relative] = "link " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: full)) ?? "?")
            default: out[relative] = "file \(mode) " + ((try? TestFiles.hash(full)) ?? "?")
            }
        }
        return out
    }

    /// Polls until `condition` holds (a functional wait, not a timing assertion).
    static func eventually(_ what: String, timeout: Double = 30, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        Issue.record("not reached within \(timeout) s: \(what)")
        throw CancellationError()
    }

    static func converged(_ trio: Trio) -> Bool {
        let trees = trio.all.map { tree(trio.folders[$0]!) }
        return trees.allSatisfy { $0 == trees[0] }
    }

    static func describe(_ trio: Trio) -> String {
        trio.all.map { "\($0): \(tree(trio.folders[$0]!).keys.sorted())" }.joined(separator: "\n")
    }

    @Test func changesAnywhereReachEveryone() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        let a = trio.folders["alice"]!
        try FileManager.default.createDirectory(atPath: a + "/nested/deeper", withIntermediateDirectories: true)
        try "hello".write(toFile: a + "/hello.txt", atomically: false, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: a + "/empty", contents: nil)
        try TestFiles.random(a + "/nested/deeper/data.bin", size: 3_000_000, mode: 0o644)
        try FileManager.default.createSymbolicLink(atPath: a + "/link", withDestinationPath: "hello.txt")
        try trio.share()
        try Self.eventually("the first sync\n\(Self.describe(trio))") { Self.converged(trio) && Self.tree(trio.folders["carol"]!).count == 6 }

        // Bob edits, renames, changes a mode, makes a folder; carol deletes.
        try "hello from bob".write(toFile: trio.path("bob", "hello.txt"), atomically: true, encoding: .utf8)
        try FileManager.default.moveItem(atPath: trio.path("bob", "nested/deeper/data.bin"), toPath: trio.path("bob", "nested/moved.bin"))
        chmod(trio.path("bob", "empty"), 0o600)
        try FileManager.default.createDirectory(atPath: trio.path("bob", "new-folder"), withIntermediateDirectories: true)
        try Self.eventually("bob's changes everywhere\n\(Self.describe(trio))") {
            Self.converged(trio) && FileManager.default.fileExists(atPath: trio.path("alice", "nested/moved.bin"))
                && FileManager.default.fileExists(atPath: trio.path("carol", "new-folder"))
        }
        #expect(try String(contentsOfFile: trio.path("carol", "hello.txt"), encoding: .utf8) == "hello from bob")
        #expect(try TestFiles.meta(trio.path("alice", "empty")).mode == 0o600)
        #expect(!FileManager.default.fileExists(atPath: trio.path("carol", "nested/deeper/data.bin")))

        try FileManager.default.removeItem(atPath: trio.path("carol", "hello.txt"))
        try Self.eventually("carol's deletion everywhere") {
            trio.all.allSatisfy { !FileManager.default.fileExists(atPath: trio.path($0, "hello.txt")) } && Self.converged(trio)
        }
        // The rename moved no data: bob's rename reached alice without a block transfer of it.
        let status = try trio.env.cli(trio.alice, ["status", "--json"])
        #expect(status.status == 0)
        #expect(status.stdout.contains("\"percent\":100"), "\(status.stdout)")
        // Each member says how it is reached and the round trip measured, as `peers` does.
        try Self.eventually("alice's status gives each member's path and round trip") {
            let peers = (try? Self.folderStatus(trio, trio.alice))?["peers"] as? [[String: Any]] ?? []
            return peers.count == 2 && peers.allSatisfy {
                ($0["path"] as? String)?.hasPrefix("direct ") == true && (($0["roundTripMs"] as? NSNumber)?.doubleValue ?? 0) > 0
            }
        }
    }

    /// `syncpeer status --json` of a node: its (only) folder.
    static func folderStatus(_ trio: Trio, _ daemon: DaemonProcess) throws -> [String: Any] {
        let result = try trio.env.cli(daemon, ["status", "--json"])
        try #require(result.status == 0, "\(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let folders = object?["folders"] as? [[String: Any]] ?? []
        try #require(folders.count == 1, "\(result.stdout)")
        return folders[0]
    }

    /// A number from a folder's status (`key` at the top, or summed over its peers).
    static func figure(_ trio: Trio, _ daemon: DaemonProcess, _ key: String, perPeer: Bool = false) throws -> Int {
        let folder = try folderStatus(trio, daemon)
        if !perPeer { return (folder[key] as? NSNumber)?.intValue ?? -1 }
        return (folder["peers"] as? [[String: Any]] ?? []).reduce(0) { $0 + (($1[key] as? NSNumber)?.intValue ?? 0) }
    }

    /// Without auto-accept: the offer waits in `status`, `accept ID --into DIR` places the
    /// folder there, and after `unshare` alice's changes no longer reach bob, whose copy stays.
    @Test func anOfferIsAcceptedIntoAChosenFolderAndUnshareStops() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let docs = env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "one".write(toFile: docs + "/one.txt", atomically: true, encoding: .utf8)
        let alice = try DaemonProcess(env, name: "alice", environment: Self.environment)
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--receive-dir", env.home("bob-recv")], environment: Self.environment)
        _ = try env.pair(alice, bob)
        try alice.waitForState("connected", peer: "bob")
        #expect(try env.cli(alice, ["share", docs, "--with", "bob"]).status == 0)
        let offer = try bob.waitFor("share_offer", timeout: 15)
        let folderID = try #require(offer["folder"] as? String)
        let pending = try env.cli(bob, ["status"])
        #expect(pending.stdout.contains("syncpeer accept \(folderID)"), "\(pending.stdout)")
        #expect(!FileManager.default.fileExists(atPath: env.home("bob-recv") + "/docs"), "nothing is placed before the answer")

        let chosen = env.home("chosen/place")
        let accepted = try env.cli(bob, ["accept", folderID, "--into", chosen])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        try Self.eventually("one.txt in the chosen folder") { FileManager.default.fileExists(atPath: chosen + "/one.txt") }
        try "two".write(toFile: docs + "/two.txt", atomically: true, encoding: .utf8)
        try Self.eventually("two.txt follows") { FileManager.default.fileExists(atPath: chosen + "/two.txt") }

        let unshared = try env.cli(alice, ["unshare", docs])
        #expect(unshared.status == 0, "\(unshared.stderr)")
        #expect(!(try env.cli(alice, ["status"]).stdout.contains(folderID)), "alice no longer lists the folder")
        try "three".write(toFile: docs + "/three.txt", atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: docs + "/one.txt")
        Thread.sleep(forTimeInterval: 3)   // longer than the watch delay and a rescan: nothing may follow
        #expect(!FileManager.default.fileExists(atPath: chosen + "/three.txt"), "a change after unshare reached bob")
        #expect(FileManager.default.fileExists(atPath: chosen + "/one.txt"), "bob's copy stays whole")
        #expect(FileManager.default.fileExists(atPath: docs + "/two.txt"), "unshare deletes nothing")
        #expect(try env.cli(bob, ["accept", "nosuch-folder"]).status != 0)
    }

    @Test func renamesAndCopiesMoveNoData() throws {
        // No periodic rescan during the test: the rename must be seen by the watcher (a full
        // scan has no rename to go by and reads the file at its new path).
        var environment = Self.environment
        environment["SYNCPEER_RESCAN_MS"] = "600000"
        let trio = try Trio(environment: environment)
        defer { trio.env.cleanup() }
        let size = 4_000_000
        try TestFiles.random(trio.path("alice", "report.bin"), size: size)
        try trio.share()
        try Self.eventually("the first sync\n\(Self.describe(trio))") {
            Self.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "report.bin"))
        }
        func received() throws -> [String: Int] {
            try ["bob": Self.figure(trio, trio.bob, "receivedBytes", perPeer: true),
                 "carol": Self.figure(trio, trio.carol, "receivedBytes", perPeer: true)]
        }
        let first = try received()
        #expect(first["bob"]! >= size && first["carol"]! >= size, "the first sync came over the network: \(first)")
        // A folder to move into, watched before the move (a move into a folder made in the
        // same instant may reach the watcher as a deletion and a new file: then it is read).
        try FileManager.default.createDirectory(atPath: trio.path("alice", "archive"), withIntermediateDirectories: true)
        try Self.eventually("the archive folder everywhere") { FileManager.default.fileExists(atPath: trio.path("carol", "archive")) }
        let scannedBefore = try Self.figure(trio, trio.alice, "scannedBytes")

        // A rename into another folder: alice does not read the file again, nobody fetches it.
        try FileManager.default.moveItem(atPath: trio.path("alice", "report.bin"), toPath: trio.path("alice", "archive/report.bin"))
        try Self.eventually("the rename everywhere\n\(Self.describe(trio))") {
            Self.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "archive/report.bin"))
                && !FileManager.default.fileExists(atPath: trio.path("bob", "report.bin"))
        }
        let afterRename = try received()
        let scannedAfter = try Self.figure(trio, trio.alice, "scannedBytes")
        print("renamesAndCopiesMoveNoData: fetched \(first) → \(afterRename) after the rename; alice's scans read \(scannedAfter - scannedBefore) bytes for it")
        #expect(afterRename == first, "a rename fetched no block from any peer")
        #expect(scannedAfter == scannedBefore, "alice did not read the renamed file again")

        // A copy: read once on alice (it is a new file), built from local chunks elsewhere.
        try FileManager.default.copyItem(atPath: trio.path("alice", "archive/report.bin"), toPath: trio.path("alice", "copy.bin"))
        try Self.eventually("the copy everywhere\n\(Self.describe(trio))") {
            Self.converged(trio) && FileManager.default.fileExists(atPath: trio.path("bob", "copy.bin"))
                && FileManager.default.fileExists(atPath: trio.path("carol", "copy.bin"))
        }
        let afterCopy = try received()
        print("renamesAndCopiesMoveNoData: fetched \(afterCopy) after the copy")
        #expect(afterCopy == first, "a copy fetched no block from any peer")
        for (node, daemon) in [("bob", trio.bob), ("carol", trio.carol)] {
            let reused = try Self.figure(trio, daemon, "reusedBytes")
            #expect(reused >= size, "\(node) built the copy from its own file (\(reused) bytes reused)")
        }
    }

    /// Workload C in small: part of a large synced file rewritten in place. Peers rebuild
    /// it from their own copy and fetch about what changed: each chunk they lack comes as a
    /// delta against their own bytes at its range (only the changed 16 KiB blocks); every
    /// copy is byte-identical.
    @Test func aChangeInTheMiddleOfALargeFileFetchesOnlyTheChange() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        let size = 24 << 20   // above the size from which alice keeps chunk sums
        let file = trio.path("alice", "big.bin")
        try TestFiles.random(file, size: size)
        try trio.share()
        try Self.eventually("the first sync\n\(Self.describe(trio))", timeout: 60) {
            Self.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "big.bin"))
        }
        func figures(_ key: String, perPeer: Bool = false) throws -> [String: Int] {
            try ["bob": Self.figure(trio, trio.bob, key, perPeer: perPeer), "carol": Self.figure(trio, trio.carol, key, perPeer: perPeer)]
        }
        let reused = try figures("reusedBytes")

        // 300 kB rewritten in place at 10 MiB, then 100 kB at the very end, then one byte in
        // each of 16 MiB: one change after the other.
        let changes: [[(offset: Int, length: Int)]] = [[(10 << 20, 300_000)], [(size - 100_000, 100_000)],
                                                       (0..<16).map { (($0 << 20) + 12_345 * $0 + 1, 1) }]
        for (n, change) in changes.enumerated() {
            let before = try Data(contentsOf: URL(fileURLWithPath: file))
            let old = try FileChunker.manifest(ofFileAt: file)
            let received = try figures("receivedBytes", perPeer: true)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
            for (offset, length) in change {
                try handle.seek(toOffset: UInt64(offset))
                try handle.write(contentsOf: Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ n &* 13 &+ 1) ^ before[offset + $0] }))
            }
            try handle.close()
            let after = try Data(contentsOf: URL(fileURLWithPath: file))
            let expected = try TestFiles.hash(file)
            try Self.eventually("change \(n) everywhere\n\(Self.describe(trio))", timeout: 60) {
                ["bob", "carol"].allSatisfy { (try? TestFiles.hash(trio.path($0, "big.bin"))) == expected }
            }
            // What a peer lacks: the new chunks its old copy does not hold. Whole, that is
            // `plain` bytes; as deltas, only their changed 16 KiB blocks after a bitmap (small
            // chunks whole).
            let lacking = try FileChunker.manifest(ofFileAt: file).chunks.filter { chunk in !old.chunks.contains { $0.hash == chunk.hash } }
            let plain = lacking.reduce(0) { $0 + Int($1.size) }
            let deltas = lacking.reduce(0) { total, chunk in
                let (start, size) = (Int(chunk.offset), Int(chunk.size))
                guard size >= BlockDelta.minimumChunk else { return total + size }
                return total + BlockDelta.bitmapSize(size: size) + stride(from: start, to: start + size, by: BlockDelta.blockSize).reduce(0) { sum, block in
                    let range = block..<min(start + size, block + BlockDelta.blockSize)
                    return sum + (before[range] == after[range] ? 0 : range.count)
                }
            }
            let receivedAfter = try figures("receivedBytes", perPeer: true)
            print("aChangeInTheMiddleOfALargeFileFetchesOnlyTheChange: change \(n): lacking \(lacking.count) chunks, \(plain) bytes whole, "
                  + "\(deltas) as deltas; received \(received) → \(receivedAfter)")
            for node in ["bob", "carol"] {
                let fetched = receivedAfter[node]! - received[node]!
                #expect(fetched == deltas, "\(node) fetched \(fetched) bytes for change \(n): \(deltas) as deltas, \(plain) whole")
            }
            if n == 2 { #expect(deltas * 2 < plain, "scattered bytes: the deltas carry a fraction of the chunks") }
        }
        let reusedAfter = try figures("reusedBytes")
        for node in ["bob", "carol"] {
            #expect(reusedAfter[node]! - reused[node]! >= 3 * size - (3 << 20), "\(node) rebuilt the rest from its own copy")
            #expect(Self.tree(trio.folders[node]!).keys.sorted() == ["big.bin"], "no temporary left behind on \(node)")
        }
    }

    /// A node killed while it rebuilds a changed large file from its own copy keeps the old
    /// version (the new one is assembled beside it), never a mix; after a restart it has the
    /// new one. The kill is aimed at the rebuild by waiting for its temporary file to appear.
    @Test func aKillDuringARebuildFromLocalChunksLeavesTheOldVersion() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        let size = 96 << 20
        try TestFiles.random(trio.path("alice", "big.bin"), size: size)
        let old = try TestFiles.hash(trio.path("alice", "big.bin"))
        try trio.share()
        try Self.eventually("the first sync\n\(Self.describe(trio))", timeout: 120) {
            ["bob", "carol"].allSatisfy { (try? TestFiles.hash(trio.path($0, "big.bin"))) == old }
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: trio.path("alice", "big.bin")))
        try handle.seek(toOffset: UInt64(size / 2))
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 200_000))
        try handle.close()
        let new = try TestFiles.hash(trio.path("alice", "big.bin"))
        var sawRebuild = false
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !sawRebuild {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: trio.folders["bob"]!)) ?? []
            sawRebuild = names.contains { $0.hasSuffix(".syncpeer-tmp") }
            if !sawRebuild { usleep(2_000) }
        }
        trio.bob.crash()
        let after = try TestFiles.hash(trio.path("bob", "big.bin"))
        print("aKillDuringARebuildFromLocalChunksLeavesTheOldVersion: killed \(sawRebuild ? "during" : "outside") the rebuild; bob has the \(after == old ? "old" : after == new ? "new" : "TORN") version")
        #expect(after == old || after == new, "bob's file is one whole version, never a mix")
        trio.bob = try trio.restart(trio.bob)
        try Self.eventually("bob has the new version after the restart", timeout: 60) {
            (try? TestFiles.hash(trio.path("bob", "big.bin"))) == new
        }
        #expect(try TestFiles.hash(trio.path("carol", "big.bin")) == new)
    }

    @Test func anIgnoredFileNeverLeavesItsMachine() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        let a = trio.folders["alice"]!
        try "*.secret\nbuild/\n".write(toFile: a + "/.syncpeerignore", atomically: true, encoding: .utf8)
        try "keep".write(toFile: a + "/visible.txt", atomically: true, encoding: .utf8)
        try "password".write(toFile: a + "/key.secret", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: a + "/build", withIntermediateDirectories: true)
        try "artifact".write(toFile: a + "/build/out.o", atomically: true, encoding: .utf8)
        try trio.share()
        try Self.eventually("visible files arrive") {
            FileManager.default.fileExists(atPath: trio.path("carol", "visible.txt"))
                && FileManager.default.fileExists(atPath: trio.path("bob", "visible.txt"))
        }
        try "more secrets".write(toFile: a + "/later.secret", atomically: true, encoding: .utf8)
        try "touch".write(toFile: a + "/visible2.txt", atomically: true, encoding: .utf8)
        try Self.eventually("a later visible file arrives") { FileManager.default.fileExists(atPath: trio.path("bob", "visible2.txt")) }
        for node in ["bob", "carol"] {
            // The patterns are alice's alone: her ignore file stays with her too.
            for ignored in ["key.secret", "later.secret", "build/out.o", "build", ".syncpeerignore"] {
                #expect(!FileManager.default.fileExists(atPath: trio.path(node, ignored)), "\(ignored) reached \(node)")
            }
        }
    }

    @Test func concurrentEditsLeaveExactlyOneConflictCopyEverywhere() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        try "original".write(toFile: trio.path("alice", "notes.txt"), atomically: true, encoding: .utf8)
        try trio.share()
        try Self.eventually("notes.txt everywhere") { trio.all.allSatisfy { FileManager.default.fileExists(atPath: trio.path($0, "notes.txt")) } }
        // Both edit while cut off from each other: stop alice, edit on bob; edit alice's copy; restart.
        trio.alice.stop()
        try "bob's edit".write(toFile: trio.path("bob", "notes.txt"), atomically: true, encoding: .utf8)
        try "alice's edit, longer".write(toFile: trio.path("alice", "notes.txt"), atomically: true, encoding: .utf8)
        try TestFiles.setMtime(trio.path("alice", "notes.txt"), 1_700_000_000_000_000_000)
        trio.alice = try trio.restart(trio.alice)
        try Self.eventually("one conflict copy on every node\n\(Self.describe(trio))", timeout: 45) {
            Self.converged(trio) && trio.all.allSatisfy { node in
                Self.tree(trio.folders[node]!).keys.filter { $0.contains(".sync-conflict-") }.count == 1
            }
        }
        // Bob's edit is newer (alice's was dated 2023): it wins; alice's is the copy.
        #expect(try String(contentsOfFile: trio.path("carol", "notes.txt"), encoding: .utf8) == "bob's edit")
        let copy = try #require(Self.tree(trio.folders["carol"]!).keys.first { $0.contains(".sync-conflict-") })
        #expect(try String(contentsOfFile: trio.path("carol", copy), encoding: .utf8) == "alice's edit, longer")
        let listed = try trio.env.cli(trio.bob, ["conflicts"])
        #expect(listed.stdout.contains("notes.sync-conflict-"), "\(listed.stdout)")
        // Resolving on bob keeps bob's version; the copy disappears everywhere.
        let resolved = try trio.env.cli(trio.bob, ["resolve", trio.path("bob", "notes.txt"), "--keep", "local"])
        #expect(resolved.status == 0, "\(resolved.stderr)")
        try Self.eventually("the conflict copy is gone everywhere") {
            Self.converged(trio) && trio.all.allSatisfy { !Self.tree(trio.folders[$0]!).keys.contains { $0.contains(".sync-conflict-") } }
        }
    }

    /// The same conflict reached through a relay: carol (offline) and bob edit; bob's edit
    /// reaches alice first; when carol returns, both versions survive everywhere.
    @Test func aConflictThroughARelayKeepsBothVersions() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        try "shopping: milk".write(toFile: trio.path("alice", "list.txt"), atomically: false, encoding: .utf8)
        try trio.share()
        try Self.eventually("list.txt everywhere") { Self.converged(trio) && Self.tree(trio.folders["carol"]!).count == 1 }
        trio.carol.stop()
        try "eggs (carol)".write(toFile: trio.path("carol", "list.txt"), atomically: false, encoding: .utf8)
        Thread.sleep(forTimeInterval: 0.05)
        try "tea (bob)".write(toFile: trio.path("bob", "list.txt"), atomically: false, encoding: .utf8)
        try Self.eventually("bob's edit reaches alice") {
            (try? String(contentsOfFile: trio.path("alice", "list.txt"), encoding: .utf8)) == "tea (bob)"
        }
        trio.carol = try trio.restart(trio.carol)
        try Self.eventually("one conflict copy everywhere\n\(Self.describe(trio))", timeout: 45) {
            Self.converged(trio) && trio.all.allSatisfy { node in
                Self.tree(trio.folders[node]!).keys.filter { $0.contains(".sync-conflict-") }.count == 1
            }
        }
        #expect(try String(contentsOfFile: trio.path("carol", "list.txt"), encoding: .utf8) == "tea (bob)")
        let copy = try #require(Self.tree(trio.folders["bob"]!).keys.first { $0.contains(".sync-conflict-") })
        #expect(try String(contentsOfFile: trio.path("bob", copy), encoding: .utf8) == "eggs (carol)")
    }

    @Test func aNodeOfflineDuringChangesCatchesUp() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        try "v1".write(toFile: trio.path("alice", "a.txt"), atomically: true, encoding: .utf8)
        try trio.share()
        try Self.eventually("first sync") { Self.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "a.txt")) }
        trio.carol.stop()
        try "v2".write(toFile: trio.path("alice", "a.txt"), atomically: true, encoding: .utf8)
        try "new".write(toFile: trio.path("bob", "b.txt"), atomically: true, encoding: .utf8)
        try Self.eventually("alice has bob's file") { FileManager.default.fileExists(atPath: trio.path("alice", "b.txt")) }
        trio.carol = try trio.restart(trio.carol)
        try Self.eventually("carol caught up\n\(Self.describe(trio))") { Self.converged(trio) }
        #expect(try String(contentsOfFile: trio.path("carol", "a.txt"), encoding: .utf8) == "v2")
    }

    /// A link and a file re-made on carol exactly as they were (same target; same content and
    /// mtime, another inode): the scan sees no change, and a peer's later edit and deletion
    /// still apply there (the applier compares what the scanner compares; comparing inodes
    /// made carol refuse them for ever and the folder never converged: chaos seed 1003).
    @Test func aPeersChangeAppliesOverAnEntryRemadeIdentically() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        try "content".write(toFile: trio.path("alice", "f.txt"), atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: trio.path("alice", "l"), withDestinationPath: "f.txt")
        try trio.share()
        try Self.eventually("first sync") { Self.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "f.txt")) }
        let file = trio.path("carol", "f.txt")
        let before = try TestFiles.meta(file)
        let mtime = before.mtime
        try "content".write(toFile: file + ".new", atomically: false, encoding: .utf8)
        chmod(file + ".new", mode_t(before.mode))
        var times = [timespec(tv_sec: Int(mtime / 1_000_000_000), tv_nsec: Int(mtime % 1_000_000_000)),
                     timespec(tv_sec: Int(mtime / 1_000_000_000), tv_nsec: Int(mtime % 1_000_000_000))]
        #expect(utimensat(AT_FDCWD, file + ".new", &times, 0) == 0)
        #expect(rename(file + ".new", file) == 0)
        #expect(unlink(trio.path("carol", "l")) == 0 && symlink("f.txt", trio.path("carol", "l")) == 0)
        Thread.sleep(forTimeInterval: 1.5)   // carol's watcher reports both (nothing to sync)
        try "edited by alice".write(toFile: trio.path("alice", "f.txt"), atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: trio.path("alice", "l"))
        try Self.eventually("alice's edit and deletion on carol\n\(Self.describe(trio))") {
            Self.converged(trio) && (try? String(contentsOfFile: file, encoding: .utf8)) == "edited by alice"
                && !FileManager.default.fileExists(atPath: trio.path("carol", "l"))
        }
    }

    /// Carol, who got the folder from alice, shares it with bob too (bob has it already: he
    /// is asked, even with auto-accept, and then just gains carol as a peer, no second copy). Coming back to a folder both have,
    /// carol pulls from both: her status counts block bytes from each (the sources of the
    /// blocks are looked up again at most every 250 ms while a pull runs, so a peer that connects later joins in).
    @Test func aReturningNodePullsFromSeveralPeers() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        try "v1".write(toFile: trio.path("alice", "a.txt"), atomically: true, encoding: .utf8)
        try trio.share()
        try Self.eventually("first sync") { Self.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "a.txt")) }
        _ = try trio.env.pair(trio.carol, trio.bob, autoAccepted: true)
        try trio.carol.waitForState("connected", peer: "bob")
        let shared = try trio.env.cli(trio.carol, ["share", trio.folders["carol"]!, "--with", "bob"])
        try #require(shared.status == 0, "\(shared.stderr)")
        // Bob auto-accepts new folders, never a peer joining one he has: that is asked.
        let offer = try trio.bob.waitFor("share_offer", timeout: 15)
        let asked = try trio.env.cli(trio.bob, ["status"])
        #expect(asked.stdout.contains("offer: carol") && asked.stdout.contains("asks to join your folder \(trio.folders["bob"]!)"),
                "\(asked.stdout)")
        let accepted = try trio.env.cli(trio.bob, ["accept", try #require(offer["folder"] as? String)])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        try Self.eventually("bob counts carol as a peer of the folder") {
            let peers = ((try? Self.folderStatus(trio, trio.bob))?["peers"] as? [[String: Any]]) ?? []
            return peers.contains { (($0["peer"] as? [String: Any])?["name"] as? String) == "carol" }
        }
        let bobFolders = try FileManager.default.contentsOfDirectory(atPath: trio.env.home("bob-recv"))
        #expect(bobFolders == ["alice-docs"], "no second copy of the folder on bob: \(bobFolders)")
        trio.carol.stop()
        var total = 0
        for i in 0..<48 {
            try TestFiles.random(trio.path("alice", "part-\(i).bin"), size: 3_000_000 + i)
            total += 3_000_000 + i
        }
        try Self.eventually("bob has every part", timeout: 90) {
            (0..<48).allSatisfy { FileManager.default.fileExists(atPath: trio.path("bob", "part-\($0).bin")) }
        }
        trio.carol = try trio.restart(trio.carol)
        try Self.eventually("carol caught up\n\(Self.describe(trio))", timeout: 90) { Self.converged(trio) }
        let peers = try Self.folderStatus(trio, trio.carol)["peers"] as? [[String: Any]] ?? []
        var received: [String: Int] = [:]
        for peer in peers {
            let name = (peer["peer"] as? [String: Any])?["name"] as? String ?? "?"
            received[name] = (peer["receivedBytes"] as? NSNumber)?.intValue ?? 0
        }
        print("aReturningNodePullsFromSeveralPeers: carol fetched \(received) of \(total) bytes")
        #expect(received.values.reduce(0, +) >= total, "every part came over the network: \(received)")
        #expect((received["alice"] ?? 0) > 0 && (received["bob"] ?? 0) > 0, "blocks came from both alice and bob: \(received)")
    }

    /// A node killed in the middle of a large sync leaves no torn file (each file is absent
    /// or complete) and finishes after a restart.
    @Test func aKillDuringALargeSyncLeavesNoTornFile() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        var expected: [String: String] = [:]
        for i in 0..<40 {
            let name = "big-\(i).bin"
            try TestFiles.random(trio.path("alice", name), size: 3_000_000 + i)
            expected[name] = try TestFiles.hash(trio.path("alice", name))
        }
        try trio.share()
        // While it pulls, status names the files in flight, their progress and their peers.
        // Looked for from the share on: once the first file is in place, the last batch's
        // fetches may already be over (a make test under load missed them for 30 s).
        var inFlight: [[String: Any]] = []
        try Self.eventually("bob's status shows a file in flight") {
            inFlight = ((try? Self.folderStatus(trio, trio.bob))?["transfers"] as? [[String: Any]]) ?? []
            return !inFlight.isEmpty
        }
        try Self.eventually("bob has started receiving") {
            ((try? FileManager.default.contentsOfDirectory(atPath: trio.folders["bob"]!)) ?? []).contains { $0.hasPrefix("big-") }
        }
        let first = inFlight[0]
        #expect((first["path"] as? String)?.hasPrefix("big-") == true, "\(first)")
        let sources = ((first["peers"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }
        #expect(sources.contains { $0 == "alice" || $0 == "carol" }, "\(first)")
        #expect(((first["needed"] as? NSNumber)?.intValue ?? 0) >= 3_000_000, "\(first)")
        trio.bob.crash()
        for name in (try FileManager.default.contentsOfDirectory(atPath: trio.folders["bob"]!)) where name.hasPrefix("big-") {
            #expect(try TestFiles.hash(trio.path("bob", name)) == expected[name], "\(name) is torn")
        }
        trio.bob = try trio.restart(trio.bob)
        try Self.eventually("bob completed after the restart", timeout: 60) {
            expected.keys.allSatisfy { FileManager.default.fileExists(atPath: trio.path("bob", $0)) }
        }
        for (name, hash) in expected { #expect(try TestFiles.hash(trio.path("bob", name)) == hash) }
        let leftovers = Self.tree(trio.folders["bob"]!).keys.filter { !$0.hasPrefix("big-") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test func aVanishedRootStopsWithAnErrorAndDeletesNothingElsewhere() throws {
        let trio = try Trio()
        defer { trio.env.cleanup() }
        for i in 0..<12 { try "f\(i)".write(toFile: trio.path("alice", "f\(i).txt"), atomically: true, encoding: .utf8) }
        try trio.share()
        try Self.eventually("first sync") { Self.converged(trio) && Self.tree(trio.folders["bob"]!).count == 12 }
        try FileManager.default.moveItem(atPath: trio.folders["alice"]!, toPath: trio.env.home("moved-away"))
        try trio.alice.waitFor("folder", timeout: 15) { ($0["reason"] as? String)?.contains("missing") == true }
        Thread.sleep(forTimeInterval: 2)
        #expect(Self.tree(trio.folders["bob"]!).count == 12, "nothing was deleted on bob")
        #expect(Self.tree(trio.folders["carol"]!).count == 12, "nothing was deleted on carol")
        let status = try trio.env.cli(trio.alice, ["status"])
        #expect(status.stdout.contains("error: the folder root"), "\(status.stdout)")
    }
}
