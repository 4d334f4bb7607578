import Foundation
import Glibc
import Testing

/// A power-loss file system (`PowerLoss/powerlossfs.py`, FUSE) mounted for one test: what is
/// written below `root` survives `cut()` only as far as it was made durable (fsync of the
/// file for its data, of the directory for its names); see the script for the exact rules.
final class PowerLossMount {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("PowerLoss").path
    static let script = directory + "/powerlossfs.py"
    /// Debian's python, where `apt-get install python3-pyfuse3` puts pyfuse3.
    static let python = "/usr/bin/python3"

    /// Why power-loss tests cannot run here (nil: they can).
    static let unavailableReason: String? = {
        guard access("/dev/fuse", R_OK | W_OK) == 0 else { return "power-loss tests need /dev/fuse" }
        guard getuid() == 0 else { return "power-loss tests mount FUSE: they need root" }
        guard let probe = try? PowerLossMount.run(python, ["-c", "import pyfuse3, trio"]), probe.status == 0 else {
            return "power-loss tests need python3-pyfuse3 (scripts/install-deps.sh installs it)"
        }
        return nil
    }()
    static var available: Bool { unavailableReason == nil }

    let base: String
    /// Where the file system is mounted.
    let root: String
    let control: String
    let process = Process()

    /// Mounts a fresh, empty power-loss file system in a new directory under `parent`.
    init(in parent: String) throws {
        base = parent + "/powerloss-\(UUID().uuidString.prefix(8))"
        root = base + "/mnt"
        control = base + "/control.sock"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = [Self.script, "mount", base + "/store", root, control]
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while !(isMounted && FileManager.default.fileExists(atPath: control)) {
            try #require(process.isRunning && Date() < deadline, "powerlossfs did not mount on \(root)")
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    var isMounted: Bool {
        var here = stat(), above = stat()
        return stat(root, &here) == 0 && stat(base, &above) == 0 && here.st_dev != above.st_dev
    }

    /// Loses power: every change not yet durable is undone (with a seed, each file and
    /// directory keeps a random prefix of its pending changes). Every process writing here
    /// must be dead first. Returns the file system's counts (`lost`, `cuts`, …).
    @discardableResult
    func cut(seed: UInt64? = nil) throws -> [String: Any] {
        let result = try Self.run(Self.python, [Self.script, "ctl", control, "cut"] + (seed.map { [String($0)] } ?? []))
        try #require(result.status == 0, "powerlossfs cut failed: \(result.stdout) \(result.stderr)")
        return (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
    }

    /// Unmounts, stops the file system and removes its store. libfuse's SIGTERM handler only
    /// asks its loop to end at the next request, and a lazily unmounted file system may get
    /// none (a long run hung there for good): after a while it is killed.
    func unmount() {
        _ = try? Self.run("/usr/bin/fusermount3", ["-u", "-z", root])
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: base)
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> SyncpeerRunner.Result {
        try SyncpeerRunner.runProgram(executable, arguments)
    }
}

/// The power-loss file system's own unit tests (`PowerLoss/test_powerlossfs.py`): small
/// programs whose outcome after a cut is known (a write without fsync is lost, a name without
/// a directory fsync is lost, …). Skipped, with the reason, where FUSE cannot be used.
@Suite(.serialized, .enabled(if: PowerLossMount.available, Comment(rawValue: PowerLossMount.unavailableReason ?? "")))
struct PowerLossFileSystemTests {
    @Test func followsTheDurabilityRules() throws {
        let result = try PowerLossMount.run(PowerLossMount.python, [PowerLossMount.directory + "/test_powerlossfs.py"])
        #expect(result.status == 0, "test_powerlossfs.py:\n\(result.stdout)\n\(result.stderr)")
        #expect(result.stderr.contains("OK"), "\(result.stderr)")
    }
}
