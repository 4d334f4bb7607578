import Foundation
import Testing

extension SyncpeerRunner {
    /// Waits for a `send --json` started with `startJSONSend` to end, bounded by the receiver's
    /// `completed` event (a transfer that never ends fails there rather than hanging the read):
    /// the command exited 0 and `receiver` holds the file whole (content, mode, mtime).
    /// Returns the command's final JSON line.
    func finishJSONSend(_ send: (process: Process, stdout: Pipe), of source: String, to receiver: DaemonProcess,
                        timeout: Double = 60) throws -> [String: Any] {
        let name = URL(fileURLWithPath: source).lastPathComponent
        try receiver.waitFor("transfer", timeout: timeout) { $0["name"] as? String == name && $0["state"] as? String == "completed" }
        let stdout = String(decoding: send.stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        send.process.waitUntilExit()
        #expect(send.process.terminationStatus == 0, "\(stdout)")
        try TestFiles.expectSame(source, receiver.home + "/Downloads/" + name)
        return try #require(TransferPair.result(stdout))
    }
}
