import Foundation
import Glibc
import Testing

/// syncpeer as a versioned dependency (issue 42, point 4): examples/dependent, a package of
/// its own, names syncpeer by URL and version (`from: "0.1.0"`) and is built for real by
/// scripts/dependent-package.sh, against a git repository of this tree's files tagged 0.1.0
/// and reached by a file:// URL (SwiftPM refuses a versioned dependency with unsafe compiler
/// flags; the root package and path dependencies are exempt, hence the tagged copy).
///
/// The build takes minutes of CPU, so `make test` starts it first, in the background at the
/// lowest priority, and names its directory in SYNCPEER_DEPENDENT_PACKAGE: the test waits for
/// it (without holding a thread) beside the rest of the suite. Run alone, the test starts the
/// build itself in a temporary directory.
@Suite struct DependentPackageTests {
    static let script = InstallTests.repository.path + "/scripts/dependent-package.sh"

    /// Waits for the build in `directory` to write its status; returns the status and the log.
    static func finished(_ directory: String) async throws -> (status: String, log: String) {
        let deadline = Date().addingTimeInterval(25 * 60)
        while !FileManager.default.fileExists(atPath: directory + "/status") {
            let pid = (try? String(contentsOfFile: directory + "/pid", encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            let running = pid.map { kill($0, 0) == 0 } ?? false
            if !running && !FileManager.default.fileExists(atPath: directory + "/status") {
                Issue.record("the build in \(directory) is not running and wrote no status")
                throw CancellationError()
            }
            try #require(Date() < deadline, "the dependent package's build did not end within 25 min")
            try await Task.sleep(for: .seconds(1))
        }
        let status = try String(contentsOfFile: directory + "/status", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return (status, (try? String(contentsOfFile: directory + "/build.log", encoding: .utf8)) ?? "")
    }

    /// The package builds against syncpeer resolved at 0.1.0, and its program pairs with a
    /// `syncpeer daemon` on loopback and sends it a file through the `Syncpeer` API.
    @Test func aPackageThatDependsOnSyncpeerByURLAndVersionBuildsAndSendsAFile() async throws {
        var directory = ProcessInfo.processInfo.environment["SYNCPEER_DEPENDENT_PACKAGE"] ?? ""
        var temporary: String?
        if directory.isEmpty {
            let made = NSTemporaryDirectory() + "syncpeer-dependent-\(getpid())-\(UInt32.random(in: 0 ... .max))"
            temporary = made
            directory = made
            let started = try InstallTests.run("/bin/bash", [Self.script, "start", directory])
            try #require(started.status == 0, "\(started.output)")
        }
        defer {
            if let temporary { try? FileManager.default.removeItem(atPath: temporary) }
        }
        let build = try await Self.finished(directory)
        try #require(build.status == "0", "the dependent package did not build:\n\(build.log.suffix(6000))")
        #expect(!build.log.contains("unsafe build flags"), "\(build.log.suffix(6000))")
        // Resolved by version, not by branch or path.
        let resolved = try String(contentsOfFile: directory + "/dependent/Package.resolved", encoding: .utf8)
        #expect(resolved.contains("\"version\" : \"0.1.0\""), "\(resolved)")

        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let carol = try DaemonProcess(env, name: "carol", arguments: ["--auto-accept"])
        defer { _ = carol.stop() }
        let file = env.home("note.txt")
        try "from another package".write(toFile: file, atomically: true, encoding: .utf8)
        let ran = try InstallTests.run(directory + "/dependent/.build/debug/dependent",
                                       [env.home("dependent"), "--send", file, "--to", carol.address])
        #expect(ran.status == 0, "\(ran.output)")
        #expect(ran.output.contains("paired with carol"), "\(ran.output)")
        #expect(ran.output.contains("sent note.txt to carol"), "\(ran.output)")
        try FolderSyncTests.eventually("carol has the file") {
            (try? String(contentsOfFile: carol.home + "/Downloads/note.txt", encoding: .utf8)) == "from another package"
        }
    }
}
