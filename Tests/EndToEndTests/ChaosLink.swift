import Foundation
import Glibc

/// The network between two chaos nodes, which the test can cut and heal: both directions of
/// one link go through loopback proxies, so that whichever side dials, the bytes pass here.
///
/// A node learns where to dial a peer back from the connection it accepted (source address)
/// and the peer's hello (listen port). So each proxy connects upward *from* a loopback address
/// of its own, and the other proxy of the link listens on exactly that address with the
/// dialling node's port: the address a node learns for its peer always leads back through this
/// link. With nodes on 127.61.0.x and link n on 127.61.(n+1).1 and .2 (all of 127/8 is
/// loopback on Linux, no set-up needed):
///
/// ```
///  x dials  A:py ──▶ proxy ──(from B)──▶ y     y learns B:px for x
///  y dials  B:px ──▶ proxy ──(from A)──▶ x     x learns A:py for y
/// ```
final class ChaosLink: @unchecked Sendable {
    /// How the link behaves.
    enum State: String {
        /// Bytes flow.
        case up
        /// Open connections are reset and new ones are closed at once (a refused route).
        case refused
        /// Nothing is forwarded; connections stay open and stall (a black hole: only the
        /// peers' keepalive timeouts notice).
        case silent
    }

    let name: String
    /// Where the first node dials the second (the address to pair with).
    let addressOfSecond: String
    private let proxies: [Proxy]

    /// A link between the node listening on `first` and the one on `second` ("IP", port).
    init(name: String, index: Int, first: (host: String, port: UInt16), second: (host: String, port: UInt16)) throws {
        self.name = name
        let a = "127.61.\(index + 1).1", b = "127.61.\(index + 1).2"
        let shared = SharedState()
        proxies = [
            try Proxy(listenHost: a, port: second.port, target: second, source: b, state: shared),
            try Proxy(listenHost: b, port: first.port, target: first, source: a, state: shared),
        ]
        addressOfSecond = "\(a):\(second.port)"
    }

    var state: State {
        get { proxies[0].state.value }
        set {
            proxies[0].state.value = newValue
            if newValue == .refused { proxies.forEach { $0.resetAll() } }
        }
    }

    func stop() { proxies.forEach { $0.stop() } }

    deinit { stop() }

    final class SharedState: @unchecked Sendable {
        // @unchecked: `current` is guarded by `lock`.
        private let lock = NSLock()
        private var current = State.up
        var value: State {
            get { lock.withLock { current } }
            set { lock.withLock { current = newValue } }
        }
    }

    /// One direction of a link: accepts on `listenHost:port`, connects to `target` from `source`.
    final class Proxy: @unchecked Sendable {
        // @unchecked: `pairs` and `stopped` are guarded by `lock`; the rest is immutable.
        let state: SharedState
        private let listenFD: Int32
        private let target: (host: String, port: UInt16)
        private let source: String
        private let lock = NSLock()
        private var pairs: [ObjectIdentifier: Pair] = [:]
        private var stopped = false

        init(listenHost: String, port: UInt16, target: (host: String, port: UInt16), source: String, state: SharedState) throws {
            self.state = state
            self.target = target
            self.source = source
            listenFD = try Socket.listening(on: listenHost, port: port)
            let thread = Thread { [self] in acceptLoop() }
            thread.name = "chaos-link-accept"
            thread.start()
        }

        func resetAll() {
            for pair in lock.withLock({ Array(pairs.values) }) { pair.shutdown() }
        }

        func stop() {
            let open: [Pair] = lock.withLock {
                if stopped { return [] }
                stopped = true
                Glibc.shutdown(listenFD, Int32(SHUT_RDWR))
                return Array(pairs.values)
            }
            open.forEach { $0.shutdown() }
        }

        private func acceptLoop() {
            defer { close(listenFD) }
            while true {
                let client = accept(listenFD, nil, nil)
                if client < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return
                }
                if lock.withLock({ stopped }) { close(client); return }
                guard state.value != .refused, let upstream = try? Socket.connect(to: target, from: source) else {
                    close(client)
                    continue
                }
                let pair = Pair(client: client, upstream: upstream)
                lock.withLock { pairs[ObjectIdentifier(pair)] = pair }
                for (from, to) in [(client, upstream), (upstream, client)] {
                    let thread = Thread { [self] in
                        pump(from: from, to: to)
                        if pair.directionEnded() { lock.withLock { pairs[ObjectIdentifier(pair)] = nil } }
                    }
                    thread.name = "chaos-link-pump"
                    thread.start()
                }
            }
        }

        /// Copies until the end of either side; while the link is silent, stops reading (the
        /// bytes wait in the kernel's buffers, as on a stalled route).
        private func pump(from: Int32, to: Int32) {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                while state.value == .silent { Thread.sleep(forTimeInterval: 0.05) }
                let count = read(from, &buffer, buffer.count)
                if count <= 0 { break }
                var sent = 0
                while sent < count {
                    let written = buffer[sent..<count].withUnsafeBytes { send(to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if written <= 0 { break }
                    sent += written
                }
                if sent < count { break }
            }
            Glibc.shutdown(from, Int32(SHUT_RDWR))
            Glibc.shutdown(to, Int32(SHUT_RDWR))
        }
    }

    /// A proxied connection's two sockets, closed once both pumps have ended.
    final class Pair: @unchecked Sendable {
        // @unchecked: `ended` is guarded by `lock`; the descriptors are immutable.
        let client: Int32, upstream: Int32
        private let lock = NSLock()
        private var ended = 0

        init(client: Int32, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }

        func shutdown() {
            Glibc.shutdown(client, Int32(SHUT_RDWR))
            Glibc.shutdown(upstream, Int32(SHUT_RDWR))
        }

        /// True for the second call: the descriptors are closed then (never while a pump reads).
        func directionEnded() -> Bool {
            let last = lock.withLock { ended += 1; return ended == 2 }
            if last {
                close(client)
                close(upstream)
            }
            return last
        }
    }
}

/// Plain IPv4 sockets for the link proxies (the product's TCP types cannot bind a source).
enum Socket {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func address(_ host: String, _ port: UInt16) throws -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw Failure(description: "bad address \(host)") }
        return address
    }

    static func bind(_ fd: Int32, _ host: String, _ port: UInt16) throws {
        var address = try address(host, port)
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw Failure(description: "bind \(host):\(port): errno \(errno)") }
    }

    static func listening(on host: String, port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        do {
            try bind(fd, host, port)
            guard listen(fd, 64) == 0 else { throw Failure(description: "listen: errno \(errno)") }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    static func connect(to target: (host: String, port: UInt16), from source: String) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        do {
            try bind(fd, source, 0)
            var address = try address(target.host, target.port)
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard result == 0 else { throw Failure(description: "connect \(target): errno \(errno)") }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }
}
