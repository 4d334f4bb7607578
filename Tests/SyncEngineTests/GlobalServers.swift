import Foundation
import Glibc
import PeerCrypto
import PeerNet

/// Syncthing's servers (Debian's syncthing-discosrv and syncthing-relaysrv) run by a test on
/// 127.0.0.1 only, in a temporary directory, stopped (by their PID) when the test ends; the
/// relay with `-pools=""`, so it never registers with the public pool.
final class GlobalServer {
    let process = Process()
    let directory: URL
    let port: UInt16
    /// The server's certificate ID as the server itself prints it.
    private(set) var printedID = ""
    let log: URL

    struct Unavailable: Error, CustomStringConvertible { var description: String }

    static func discovery() throws -> GlobalServer {
        try GlobalServer(binary: "/usr/bin/stdiscosrv") { dir, port in
            ["-listen", "127.0.0.1:\(port)", "-db-dir", dir.appendingPathComponent("db").path,
             "-cert", dir.appendingPathComponent("cert.pem").path, "-key", dir.appendingPathComponent("key.pem").path,
             "-replication-listen", ""]
        }
    }

    static func relay() throws -> GlobalServer {
        try GlobalServer(binary: "/usr/bin/strelaysrv") { dir, port in
            ["-listen", "127.0.0.1:\(port)", "-keys", dir.path, "-pools=", "-status-srv=", "-nat=false"]
        }
    }

    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/stdiscosrv") && FileManager.default.isExecutableFile(atPath: "/usr/bin/strelaysrv")
    }

    private init(binary: String, arguments: (URL, UInt16) -> [String]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-global-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let probe = try TCPListener(host: "127.0.0.1", port: 0)
        port = probe.port
        probe.close()
        log = directory.appendingPathComponent("server.log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments(directory, port)
        process.currentDirectoryURL = directory
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let range = text.range(of: "device ID is ") ?? text.range(of: "?id=") {
                printedID = String(text[range.upperBound...].prefix(63))
            }
            if printedID.count == 63, (try? TCPConnection.connect(host: "127.0.0.1", port: port, timeout: .seconds(1)))?.close() != nil {
                return
            }
            usleep(100_000)
        }
        stop()
        throw Unavailable(description: "\(binary) did not start: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
    }

    /// The server's certificate in DER (from its cert.pem).
    func certificate() throws -> [UInt8] {
        let pem = try String(contentsOf: directory.appendingPathComponent("cert.pem"), encoding: .utf8)
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let der = Data(base64Encoded: body) else { throw Unavailable(description: "cert.pem is not PEM") }
        return Array(der)
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}
