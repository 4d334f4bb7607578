import Foundation
import Glibc
import PeerCrypto
@testable import PeerNet
import PeerModel
import PeerWire
import Testing

/// What a user would watch in `top` for a daemon: resident memory (now and peak), threads
/// and open file descriptors, from /proc/PID.
struct ProcessFigures: CustomStringConvertible {
    let rssKiB: Int
    let peakKiB: Int
    let threads: Int
    let fds: Int
    /// User and system CPU time the process has used since it started.
    let cpuSeconds: Double

    init(pid: Int32) throws {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        func field(_ name: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
                return Int(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? -1
            }
            return -1
        }
        rssKiB = field("VmRSS")
        peakKiB = field("VmHWM")
        threads = field("Threads")
        fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        // utime and stime are fields 14 and 15 of /proc/PID/stat, the 12th and 13th after the
        // command name (in parentheses, possibly with spaces).
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = stat[(stat.lastIndex(of: ")") ?? stat.startIndex)...].split(separator: " ")
        let ticks = fields.count > 13 ? (Double(fields[12]) ?? 0) + (Double(fields[13]) ?? 0) : 0
        cpuSeconds = ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The names of the process's threads, counted (for a failure message).
    static func threadNames(pid: Int32) -> [String: Int] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var names: [String: Int] = [:]
        for task in tasks {
            let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? "?"
            let wait = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/wchan", encoding: .utf8)) ?? "?"
            names[name.trimmingCharacters(in: .whitespacesAndNewlines) + " in " + wait, default: 0] += 1
        }
        return names
    }

    var rssMiB: Double { Double(rssKiB) / 1024 }
    var peakMiB: Double { Double(peakKiB) / 1024 }

    var description: String {
        String(format: "RSS %.1f MiB (peak %.1f MiB), %d threads, %d fds, %.2f CPU-s", rssMiB, peakMiB, threads, fds, cpuSeconds)
    }

    /// Prints "label: before → after" for the test log (the figures the issue asks for).
    static func report(_ label: String, _ before: ProcessFigures, _ after: ProcessFigures, during: ProcessFigures? = nil) {
        var line = "[bounds] \(label): before \(before)"
        if let during { line += "; during \(during)" }
        line += "; after \(after)"
        print(line)
    }

    /// Waits (bounded) until the daemon's threads and fds are back within `slack` of
    /// `baseline`; returns the last figures either way (the caller asserts).
    static func settle(pid: Int32, to baseline: ProcessFigures, threads threadSlack: Int, fds fdSlack: Int,
                       within seconds: Double = 20) throws -> ProcessFigures {
        let deadline = Date().addingTimeInterval(seconds)
        var figures = try ProcessFigures(pid: pid)
        while Date() < deadline && (figures.threads > baseline.threads + threadSlack || figures.fds > baseline.fds + fdSlack) {
            Thread.sleep(forTimeInterval: 0.1)
            figures = try ProcessFigures(pid: pid)
        }
        return figures
    }
}

/// A TCP connection to 127.0.0.1:`port` from the loopback address `source` (any of
/// 127.0.0.0/8), so one test process can be many source addresses.
func loopbackConnection(from source: String, to port: UInt16) throws -> TCPConnection {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw BoundsTestError.system("socket: \(errno)") }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)  // SO_SNDTIMEO also bounds the blocking connect
    _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    func address(_ host: String, _ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        _ = inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }
    func call(_ address: sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = address
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
    guard call(address(source, 0), { bind(fd, $0, $1) }) == 0,
          call(address("127.0.0.1", port), { connect(fd, $0, $1) }) == 0 else {
        let code = errno
        _ = Glibc.close(fd)
        throw BoundsTestError.system("bind/connect from \(source): \(String(cString: strerror(code)))")
    }
    return TCPConnection(fd: fd, remote: nil)
}

/// Completes a real Noise handshake from `source` as a fresh identity; the channel stays open.
func roguePeer(from source: String, to port: UInt16, name: String, keyPair: KeyPair = .generate()) throws -> SecureChannel {
    let stream = try loopbackConnection(from: source, to: port)
    let hello = Hello(displayName: name, softwareVersion: "rogue 0.0.1", features: ["messages"], listenPort: nil)
    return try SecureChannel.initiate(over: stream, staticKey: keyPair, hello: hello, timeout: .seconds(5))
}

enum BoundsTestError: Error {
    case system(String)
    case protocolError(String)
}

/// A paired, hostile folder member driven step by step from the test thread: it reads only
/// when the test asks (answering pings then), so the test decides when it stops reading.
final class RogueMember {
    let keyPair = KeyPair.generate()
    let name: String
    let channel: SecureChannel
    var deviceKey: String { DeviceID(publicKey: keyPair.publicKey).compact }

    /// Connects to `daemon`, gets its invitation accepted through the CLI and returns paired.
    init(_ env: SyncpeerRunner, _ daemon: DaemonProcess, name: String) throws {
        self.name = name
        channel = try roguePeer(from: "127.0.0.1", to: daemon.port, name: name, keyPair: keyPair)
        let invitation = try daemon.waitFor("invitation") { $0.peerName == name }
        let accepted = try env.cli(daemon, ["accept", try #require(invitation["invitation"] as? String)])
        try #require(accepted.status == 0, "accept: \(accepted.stderr)")
        _ = try next(within: 10) { $0 == .pairing(.accepted) }
    }

    /// Reads (answering pings) until a frame matches; throws after `seconds`.
    func next(within seconds: Double, where match: (Frame) -> Bool) throws -> Frame {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while true {
            guard let frame = try channel.receive(deadline: deadline) else {
                throw BoundsTestError.protocolError("\(name): the daemon closed the connection")
            }
            if case let .ping(nonce) = frame { try channel.send(.pong(nonce)); continue }
            if match(frame) { return frame }
        }
    }

    /// Joins the folder the daemon offers; returns its ID and the daemon's index entries.
    func joinOffered(within seconds: Double = 10) throws -> (folder: String, entries: [SyncFileEntry]) {
        guard case let .shareOffer(folder, _) = try next(within: seconds, where: {
            if case .shareOffer = $0 { true } else { false }
        }) else { throw BoundsTestError.protocolError("no share offer") }
        try channel.send(.shareAnswer(folder: folder, accepted: true, reason: ""))
        guard case let .indexUpdate(_, _, entries) = try next(within: seconds, where: {
            if case let .indexUpdate(id, _, entries) = $0 { id == folder && !entries.isEmpty } else { false }
        }) else { throw BoundsTestError.protocolError("no index") }
        return (folder, entries)
    }

    func close() { channel.close() }

    /// Bob (a daemon started with `environment`) sharing a folder of one file with a new
    /// rogue member, which joined it (`folderID`).
    static func joinedFolder(_ env: SyncpeerRunner, environment: [String: String])
        throws -> (bob: DaemonProcess, rogue: RogueMember, folderID: String) {
        let bob = try DaemonProcess(env, name: "bob", environment: environment)
        let folder = env.home("bob-shared")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("hello".utf8).write(to: URL(fileURLWithPath: folder + "/one.txt"))
        let rogue = try RogueMember(env, bob, name: "mallory")
        let shared = try env.cli(bob, ["share", folder, "--with", "mallory"])
        try #require(shared.status == 0, "share: \(shared.stderr)")
        return (bob, rogue, try rogue.joinOffered().folder)
    }

    /// A tombstone of this member for `path`, at `sequence` (its version's counter too).
    func tombstone(_ path: String, _ sequence: UInt64) -> SyncFileEntry {
        SyncFileEntry(FileEntry(path: path, kind: .file, mtimeNs: 0, mode: 0o644, deleted: true, version: [deviceKey: sequence],
                                modifiedBy: deviceKey, sequence: Int64(sequence)))
    }
}

/// One request and its answer line on a daemon's control socket, waiting at most `seconds`
/// (nil: no answer in time). Never hangs on a daemon that does not answer.
func controlRequest(_ daemon: DaemonProcess, _ json: String, within seconds: Double) throws -> String? {
    let connection = try UnixConnection.connect(path: daemon.home + "/control.sock", timeout: .seconds(5))
    defer { connection.close() }
    try connection.write(Array((json + "\n").utf8))
    var reader = LineReader(connection)
    do throws(NetError) {
        return try reader.readLine(deadline: .now + .milliseconds(Int(seconds * 1000)))
    } catch .timedOut {
        return nil
    }
}
