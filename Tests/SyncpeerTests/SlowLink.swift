import Foundation
import Glibc
import Synchronization

/// A TCP forwarder on loopback whose one direction (client → target) drains at a fixed
/// rate through small socket buffers: a link that is slower than the sender, as a Wi-Fi
/// link is, so bytes wait in the sender's own queues rather than in the kernel's (which
/// takes at most `TCPConnection.unsentLimit` unsent bytes on the sender's side).
final class SlowLink: Sendable {
    /// Where clients connect ("127.0.0.1:PORT").
    let address: String
    private let listener: Int32
    private let sockets = Mutex<[Int32]>([])
    private let stopped = Atomic<Bool>(false)
    /// Bytes forwarded from clients to the target so far.
    let forwarded = Atomic<Int>(0)

    /// Forwards connections to `target` ("host:port"); client → target at `bytesPerSecond`.
    init(to target: String, bytesPerSecond: Int) throws {
        let parts = target.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1]) else { throw Failure("bad target \(target)") }
        let host = String(parts[0])
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var small: Int32 = 32 * 1024
        setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = try Self.address(host, 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound, listen(listener, 8) == 0 else { throw Failure("cannot listen: errno \(errno)") }
        self.address = "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        Thread.detachNewThread { [self] in
            while !stopped.load(ordering: .relaxed) {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                guard let upstream = try? Self.connect(host, port) else { close(client); continue }
                sockets.withLock { $0 += [client, upstream] }
                Thread.detachNewThread { [self] in Self.pump(from: client, to: upstream, rate: bytesPerSecond) { forwarded.add($0, ordering: .relaxed) } }
                Thread.detachNewThread { Self.pump(from: upstream, to: client, rate: nil) }
            }
        }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in sockets.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Copies until either side ends; with `rate`, at most that many bytes per second, in
    /// pieces of 4 KiB.
    private static func pump(from: Int32, to: Int32, rate: Int?, counted: (Int) -> Void = { _ in }) {
        let piece = rate == nil ? 65_536 : 4_096
        var buffer = [UInt8](repeating: 0, count: piece)
        let start = ContinuousClock.now
        var moved = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, piece) }
            if count <= 0 { break }
            var offset = 0
            while offset < count {
                let wrote = buffer.withUnsafeBytes { send(to, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL)) }
                if wrote <= 0 { shutdown(from, Int32(SHUT_RDWR)); return }
                offset += wrote
            }
            moved += count
            counted(count)
            if let rate {
                let due = start + .milliseconds(moved * 1000 / rate)
                if due > .now { Thread.sleep(forTimeInterval: Double((due - .now).components.attoseconds) / 1e18) }
            }
        }
        shutdown(to, Int32(SHUT_WR))
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    private static func address(_ host: String, _ port: UInt16) throws -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw Failure("bad host \(host)") }
        return address
    }

    private static func connect(_ host: String, _ port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var target = try address(host, port)
        let connected = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure("cannot connect to \(host):\(port): errno \(errno)")
        }
        return fd
    }
}
