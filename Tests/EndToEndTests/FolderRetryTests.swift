import Foundation
import Glibc
import Testing

/// A pull that fails (a cut link, a full disk) is retried by itself as soon as its cause may
/// be gone, without the periodic rescan, and `status` says what fails and why meanwhile.
@Suite(.serialized)
struct FolderRetryTests {
    /// An hour between rescans: the rescan cannot be what finishes the sync.
    static let noRescan = ["SYNCPEER_WATCH_DELAY_MS": "200", "SYNCPEER_RESCAN_MS": "3600000"]

    /// `syncpeer status --json` of a node's only folder.
    static func folder(_ env: SyncpeerRunner, _ daemon: DaemonProcess) throws -> [String: Any] {
        let result = try env.cli(daemon, ["status", "--json"])
        try #require(result.status == 0, "\(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let folders = object?["folders"] as? [[String: Any]] ?? []
        try #require(folders.count == 1, "\(result.stdout)")
        return folders[0]
    }

    static func number(_ value: Any?) -> Int { (value as? NSNumber)?.intValue ?? -1 }

    /// Bytes fetched from each peer of the folder, summed.
    static func received(_ folder: [String: Any]) -> Int {
        (folder["peers"] as? [[String: Any]] ?? []).reduce(0) { $0 + number($1["receivedBytes"]) }
    }

    /// Alice shares `docs` with bob (auto-accepting into `receive`), both paired and connected.
    static func share(_ env: SyncpeerRunner, _ docs: String, into receive: String,
                      environment: [String: String]) throws -> (alice: DaemonProcess, bob: DaemonProcess) {
        let alice = try DaemonProcess(env, name: "alice", environment: environment)
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--auto-accept", "--receive-dir", receive], environment: environment)
        _ = try env.pair(alice, bob, autoAccepted: true)
        try bob.waitForState("connected", peer: "alice")
        let shared = try env.cli(alice, ["share", docs, "--with", "bob"])
        try #require(shared.status == 0, "\(shared.stderr)")
        return (alice, bob)
    }

    /// Waits until a node's status lists `path` as failing, the folder in `state` (between
    /// scans and pulls); returns the status and that path's entry. (Other paths may fail
    /// too: a read-only mount's own directory cannot take its peer's mode either.)
    static func failing(_ path: String, _ env: SyncpeerRunner, _ daemon: DaemonProcess, state: String, _ what: String) throws
        -> (status: [String: Any], failure: [String: Any]) {
        var status: [String: Any] = [:]
        func entry() -> [String: Any]? {
            (status["failures"] as? [[String: Any]])?.first { $0["path"] as? String == path }
        }
        try FolderSyncTests.eventually(what) {
            status = (try? folder(env, daemon)) ?? [:]
            return entry() != nil && status["state"] as? String == state
        }
        return (status, entry() ?? [:])
    }

    static func same(_ names: [String: String], _ root: String) -> Bool {
        names.allSatisfy { name, hash in (try? TestFiles.hash(root + "/" + name)) == hash }
    }

    @Test func aLinkCutInTheMiddleOfASyncIsRetriedWhenThePeerIsBack() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let docs = env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        var expected: [String: String] = [:]
        for i in 0..<24 {
            try TestFiles.random(docs + "/part-\(i).bin", size: 1_000_000 + i)
            expected["part-\(i).bin"] = try TestFiles.hash(docs + "/part-\(i).bin")
        }
        let alice = try DaemonProcess(env, name: "alice", environment: Self.noRescan)
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--auto-accept", "--receive-dir", env.home("bob-recv")],
                                    environment: Self.noRescan)
        // Alice reaches bob only through a slow proxy (about 8 MB/s) that the test can cut.
        let proxy = try ByteFlipProxy(targetPort: bob.port)
        defer { proxy.stop() }
        proxy.slowDown(microsecondsPerChunk: 8_000)
        let paired = try env.run(["--home", alice.home, "pair", proxy.address])
        try #require(paired.status == 0, "\(paired.stderr)")
        try bob.waitForState("connected", peer: "alice")
        let shared = try env.cli(alice, ["share", docs, "--with", "bob"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let received = env.home("bob-recv") + "/docs"
        func arrived() -> Int { expected.keys.filter { FileManager.default.fileExists(atPath: received + "/" + $0) }.count }
        let total = 24 * 1_000_000
        try FolderSyncTests.eventually("bob has fetched a quarter") { ((try? Self.folder(env, bob)).map(Self.received) ?? 0) >= total / 4 }
        proxy.cutConnections()
        let atCut = arrived()
        let fetched = Self.received(try Self.folder(env, bob))
        try #require(fetched < total && atCut < expected.count,
                     "the cut came in the middle of the sync (\(fetched) of \(total) bytes, \(atCut) of \(expected.count) files)")
        proxy.slowDown(microsecondsPerChunk: 0)
        try FolderSyncTests.eventually("bob has every file after the link came back (\(atCut) at the cut)", timeout: 30) {
            Self.same(expected, received)
        }
        var status: [String: Any] = [:]
        try FolderSyncTests.eventually("bob's status settles to idle with nothing failing") {
            status = (try? Self.folder(env, bob)) ?? [:]
            return status["state"] as? String == "idle" && Self.number(status["failing"]) == 0
        }
        let leftovers = (try FileManager.default.contentsOfDirectory(atPath: received)).filter { expected[$0] == nil && $0 != ".syncpeer-folder" }
        #expect(leftovers.isEmpty, "no temp file is left: \(leftovers)")
    }

    /// Root only (mounts a tmpfs): bob's folder fills up; status says so; once space is freed
    /// the sync finishes by itself, reusing what the interrupted attempt stored.
    @Test(.enabled(if: getuid() == 0, "mounts a tmpfs"))
    func aFullDiskIsRetriedOnceSpaceIsFreedWithoutFetchingAgain() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let mount = env.home("bob-recv")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
        try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", mount])
        defer { try? Self.run("/bin/umount", ["-l", mount]) }
        let docs = env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        let size = 12_000_000
        try TestFiles.random(docs + "/big.bin", size: size)
        let expected = ["big.bin": try TestFiles.hash(docs + "/big.bin")]
        // Frequent rescans: they must neither report the full disk again nor fetch again.
        let environment = ["SYNCPEER_WATCH_DELAY_MS": "200", "SYNCPEER_RESCAN_MS": "1000"]
        let (alice, bob) = try Self.share(env, docs, into: mount, environment: environment)
        defer { withExtendedLifetime(alice) {} }   // its daemon stops when it is released

        // While the disk is full, status says what fails and why, and does not claim idle.
        let (status, failure) = try Self.failing("big.bin", env, bob, state: "retrying", "bob's status shows the full disk")
        #expect(failure["path"] as? String == "big.bin", "\(status)")
        #expect((failure["reason"] as? String)?.contains("No space left on device") == true, "\(status)")
        #expect((failure["retry"] as? String)?.contains("space is freed") == true, "\(status)")
        let peer = (status["peers"] as? [[String: Any]])?.first ?? [:]
        #expect(Self.number(peer["percent"]) < 100, "not in sync while big.bin is missing: \(peer)")
        let text = try env.cli(bob, ["status"])
        #expect(text.stdout.contains("retrying") && text.stdout.contains("big.bin: cannot write"), "\(text.stdout)")
        // Several rescans later: reported once, and nothing more was fetched.
        let before = Self.received(status)
        Thread.sleep(forTimeInterval: 3.5)
        let reports = bob.events("error").filter { ($0["reason"] as? String)?.contains("big.bin") == true }
        #expect(reports.count == 1, "the full disk is reported once: \(reports)")
        let whileFull = Self.received(try Self.folder(env, bob))
        #expect(whileFull == before, "nothing is fetched while the disk stays full (\(before) → \(whileFull))")

        try Self.run("/bin/mount", ["-o", "remount,size=64m", mount])
        try FolderSyncTests.eventually("bob has big.bin once space is freed", timeout: 30) {
            Self.same(expected, mount + "/docs")
        }
        let after = Self.received(try Self.folder(env, bob))
        print("aFullDiskIsRetriedOnceSpaceIsFreed: fetched \(whileFull) bytes before space was freed, \(after) in all, for \(size)")
        #expect(after - whileFull < size / 2, "what was stored before is not fetched again (\(after - whileFull) more bytes)")
        #expect(after < size * 3 / 2, "fetched \(after) bytes for \(size)")
        let leftovers = (try FileManager.default.contentsOfDirectory(atPath: mount + "/docs")).filter { expected[$0] == nil && $0 != ".syncpeer-folder" }
        #expect(leftovers.isEmpty, "no temp file is left: \(leftovers)")
        try FolderSyncTests.eventually("bob's status settles to idle with nothing failing") {
            let settled = (try? Self.folder(env, bob)) ?? [:]
            return settled["state"] as? String == "idle" && Self.number(settled["failing"]) == 0
        }
    }

    /// Root only (mounts a read-only tmpfs inside bob's folder): a path that cannot be
    /// written is reported once per version, not at every rescan, and status says so.
    @Test(.enabled(if: getuid() == 0, "mounts a tmpfs"))
    func aPathThatCannotBeWrittenIsReportedOncePerChange() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let docs = env.home("docs")
        try FileManager.default.createDirectory(atPath: docs + "/ro", withIntermediateDirectories: true)
        try "a".write(toFile: docs + "/a.txt", atomically: true, encoding: .utf8)
        // Rescans every second: each one plans the path again.
        let environment = ["SYNCPEER_WATCH_DELAY_MS": "200", "SYNCPEER_RESCAN_MS": "1000"]
        let (alice, bob) = try Self.share(env, docs, into: env.home("bob-recv"), environment: environment)
        defer { withExtendedLifetime(alice) {} }   // its daemon stops when it is released
        let received = env.home("bob-recv") + "/docs"
        try FolderSyncTests.eventually("bob has a.txt and ro") {
            FileManager.default.fileExists(atPath: received + "/a.txt") && FileManager.default.fileExists(atPath: received + "/ro")
        }
        try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", received + "/ro"])
        defer { try? Self.run("/bin/umount", ["-l", received + "/ro"]) }

        try "version 1".write(toFile: docs + "/ro/file.txt", atomically: true, encoding: .utf8)
        func reports() -> [[String: Any]] {
            bob.events("error").filter { ($0["reason"] as? String)?.contains("ro/file.txt") == true }
        }
        try FolderSyncTests.eventually("bob reports ro/file.txt") { reports().count >= 1 }
        let (status, failure) = try Self.failing("ro/file.txt", env, bob, state: "error", "bob's status shows ro/file.txt failing")
        #expect(failure["path"] as? String == "ro/file.txt", "\(status)")
        #expect((failure["reason"] as? String)?.contains("Read-only file system") == true, "\(status)")
        Thread.sleep(forTimeInterval: 3.5)   // several rescans, each trying it again
        #expect(reports().count == 1, "reported once: \(reports().map { $0["reason"] ?? "" })")

        try "version 2".write(toFile: docs + "/ro/file.txt", atomically: true, encoding: .utf8)
        try FolderSyncTests.eventually("bob reports the new version") { reports().count >= 2 }
        Thread.sleep(forTimeInterval: 3.5)
        #expect(reports().count == 2, "reported once more for the new version: \(reports().map { $0["reason"] ?? "" })")
    }

    static func run(_ tool: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "\(tool) \(arguments) failed")
    }
}
