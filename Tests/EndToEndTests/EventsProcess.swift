import Foundation
import Testing

/// `syncpeer events` on a daemon's home, running in the background: the NDJSON lines it
/// prints are collected as they arrive, for a test to wait for.
final class EventsProcess: @unchecked Sendable {
    // @unchecked: `log` is locked; the rest is set in init.
    let process = Process()
    private let log = EventLog()

    init(_ env: SyncpeerRunner, home: String) throws {
        process.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
        process.arguments = ["--home", home, "events"]
        process.environment = ["PATH": "/usr/bin:/bin", "SYNCPEER_INTERFACE": "lo"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        log.collect(out.fileHandleForReading)
        try process.run()
    }

    /// Every event printed so far.
    var events: [[String: Any]] { log.all }

    /// The events of `kind` whose fields hold `fields` (strings compared as strings).
    func matching(_ kind: String, _ fields: [String: String] = [:]) -> [[String: Any]] {
        events.filter { event in
            event["event"] as? String == kind && fields.allSatisfy { key, value in "\(event[key] ?? "")" == value }
        }
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}
