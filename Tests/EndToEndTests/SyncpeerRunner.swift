import Foundation
import Testing

/// Runs the real `syncpeer` binary as a separate process in a temporary home.
struct SyncpeerRunner {
    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// The built binary: `$SYNCPEER_BIN`, else beside the test bundle (SwiftPM puts both in
    /// the same build directory).
    static let binary: String = {
        if let explicit = ProcessInfo.processInfo.environment["SYNCPEER_BIN"] { return explicit }
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = testBinary.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("syncpeer").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/syncpeer").path
    }()

    /// A fresh temporary directory, removed by `cleanup()`.
    let root: URL

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    func cleanup() { try? FileManager.default.removeItem(at: root) }

    func home(_ name: String) -> String { root.appendingPathComponent(name).path }

    /// Runs any program (stdin empty) to its end.
    static func runProgram(_ executable: String, _ arguments: [String]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return .init(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                     stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Runs `syncpeer ARGS` with a clean environment (no inherited SYNCPEER_HOME) and waits.
    @discardableResult
    func run(_ arguments: [String], environment extra: [String: String] = [:], stdin: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        var env = ["PATH": "/usr/bin:/bin", "HOME": root.path, "SYNCPEER_INTERFACE": "lo"]
        env.merge(extra) { _, new in new }
        process.environment = env
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus,
                      stdout: String(decoding: stdoutData, as: UTF8.self),
                      stderr: String(decoding: stderrData, as: UTF8.self))
    }

    /// Starts `syncpeer --home HOME send SOURCE --to PEER --json` in the background (the
    /// environment inherited); returns the process and its standard output.
    func startJSONSend(home: String, _ source: String, to peer: String) throws -> (process: Process, stdout: Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["--home", home, "send", source, "--to", peer, "--json"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, out)
    }
}
