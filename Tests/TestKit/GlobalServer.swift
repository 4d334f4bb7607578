public import Foundation
import Glibc

/// Syncthing's servers (Debian's syncthing-discosrv and syncthing-relaysrv) run by a test on
/// 127.0.0.1 only, in a temporary directory, stopped (by their PID) when the test ends; the
/// relay with `-pools=""`, so it never registers with the public pool.
public final class GlobalServer {
    let process = Process()
    public let directory: URL
    public let port: UInt16
    /// The server's certificate ID as the server itself prints it.
    public private(set) var printedID = ""
    public let log: URL
    /// Where it runs: the test network namespace (nil: the root one) and the host it listens on.
    let namespace: String?
    let host: String

    public struct Unavailable: Error, CustomStringConvertible { public var description: String }

    /// - Parameters: namespace: a test network namespace to run it in, listening on `host`.
    public static func discovery(namespace: String? = nil, host: String = "127.0.0.1") throws -> GlobalServer {
        try GlobalServer(binary: "/usr/bin/stdiscosrv", namespace: namespace, host: host) { dir, port in
            ["-listen", "\(host):\(port)", "-db-dir", dir.appendingPathComponent("db").path,
             "-cert", dir.appendingPathComponent("cert.pem").path, "-key", dir.appendingPathComponent("key.pem").path,
             "-replication-listen", ""]
        }
    }

    /// - Parameters: namespace: a test network namespace to run it in, listening on `host`
    ///   (127.0.0.1 unless said; "0.0.0.0" listens on all its addresses, as relays often do);
    ///   port: the port to listen on (default: a free one).
    public static func relay(namespace: String? = nil, host: String = "127.0.0.1", port: UInt16? = nil) throws -> GlobalServer {
        try GlobalServer(binary: "/usr/bin/strelaysrv", namespace: namespace, host: host, port: port) { dir, port in
            relayArguments(dir, port, host: host)
        }
    }

    static func relayArguments(_ dir: URL, _ port: UInt16, host: String = "127.0.0.1") -> [String] {
        ["-listen", "\(host):\(port)", "-keys", dir.path, "-pools=", "-status-srv=", "-nat=false"]
    }

    /// Kills the relay (SIGKILL: its sessions end at once), runs `meanwhile`, and starts it
    /// again at the same place and port with the same keys (so the same ID); returns the new
    /// one, to stop in its turn.
    public func killedAndRestarted(after pause: TimeInterval, meanwhile: () throws -> Void = {}) throws -> GlobalServer {
        kill()
        try meanwhile()
        Thread.sleep(forTimeInterval: pause)
        return try restarted(namespace: namespace, host: host)
    }

    /// Kills the server (SIGKILL), keeping its directory and keys for `restarted`.
    public func kill() {
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// The killed relay started again at the same port with the same keys (so the same ID),
    /// in `namespace` on `host` if given.
    public func restarted(namespace: String? = nil, host: String = "127.0.0.1") throws -> GlobalServer {
        try GlobalServer(binary: "/usr/bin/strelaysrv", namespace: namespace, host: host, directory: directory, port: port) {
            Self.relayArguments($0, $1, host: host)
        }
    }

    public static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/stdiscosrv") && FileManager.default.isExecutableFile(atPath: "/usr/bin/strelaysrv")
    }

    private init(binary: String, namespace: String? = nil, host: String = "127.0.0.1", directory: URL? = nil, port: UInt16? = nil,
                 arguments: (URL, UInt16) -> [String]) throws {
        self.namespace = namespace
        self.host = host
        self.directory = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-global-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
        self.port = try port ?? Self.freePort()
        log = self.directory.appendingPathComponent("server.log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        if let namespace {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
            process.arguments = ["netns", "exec", namespace, binary] + arguments(self.directory, self.port)
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = arguments(self.directory, self.port)
        }
        process.currentDirectoryURL = self.directory
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let range = text.range(of: "device ID is ") ?? text.range(of: "?id=") {
                printedID = String(text[range.upperBound...].prefix(63))
            }
            if printedID.count == 63, namespace.map({ Self.accepts(host, self.port, in: $0) }) ?? Self.accepts(self.port) { return }
            usleep(100_000)
        }
        stop()
        throw Unavailable(description: "\(binary) did not start: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
    }

    /// A port nothing listens on now on 127.0.0.1 (bound, read, released).
    public static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw Unavailable(description: "no free port on 127.0.0.1") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// Whether something accepts TCP connections at `host`:`port` inside `namespace`.
    static func accepts(_ host: String, _ port: UInt16, in namespace: String) -> Bool {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        probe.arguments = ["netns", "exec", namespace, "/bin/bash", "-c", "exec 3<>/dev/tcp/\(host)/\(port)"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    /// The server's certificate in DER (from its cert.pem).
    public func certificate() throws -> [UInt8] {
        try TestCA.der(ofPEM: directory.appendingPathComponent("cert.pem"))
    }

    public func stop() {
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}
