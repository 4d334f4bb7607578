internal import Glibc

/// A TCP connection: blocking I/O with deadlines, `TCP_NODELAY`, socket buffers sized by
/// the kernel.
///
/// `Sendable` because every stored property is immutable and the descriptor is a
/// `SocketFD`, which counts its users under a `Mutex`, serialises writes under another
/// and closes the descriptor exactly once, after `shutdown` and after its last use (see
/// `SocketFD`). One thread may read while others write or call `close()`.
package final class TCPConnection: ByteStream {
    let socket: SocketFD
    /// The local port of the connection.
    package let localPort: UInt16
    /// The peer's numeric address ("127.0.0.1", "::1").
    package let remoteHost: String
    package let remotePort: UInt16
    /// "host:port", or "[v6]:port".
    package let remoteDescription: String

    /// Takes ownership of a connected descriptor.
    init(fd: Int32, remote: SocketAddress?) {
        socket = SocketFD(fd)
        localPort = SocketAddress.of(fd, remote: false)?.port ?? 0
        let remote = remote ?? SocketAddress.of(fd, remote: true)
        remoteHost = remote?.host ?? "?"
        remotePort = remote?.port ?? 0
        remoteDescription = HostPort(host: remoteHost, port: remotePort).description
    }

    /// Connects to `host` (an IPv4 or IPv6 literal, or a name such as "localhost") on
    /// `port`, trying each address the name resolves to until one answers. Waits at most
    /// `timeout` in all.
    package static func connect(host: String, port: UInt16, timeout: Duration) throws(NetError) -> TCPConnection {
        let target = HostPort(host: host, port: port)
        guard !host.isEmpty else { throw .invalidAddress("empty host (expected host:port)") }
        guard port != 0 else { throw .invalidAddress("cannot connect to port 0 of \(target)") }
        let deadline = ContinuousClock.now + timeout
        let addresses = try resolve(host: host, port: port, passive: false)
        var lastError = NetError.unreachable(address: target.description, reason: "the name has no address")
        for address in addresses {
            do throws(NetError) {
                let fd = try connect(to: address, deadline: deadline, target: target)
                return TCPConnection(fd: fd, remote: address)
            } catch {
                lastError = error
                if case .timedOut = error { break }
            }
        }
        throw lastError
    }

    /// Connects to `address`; see `connect(host:port:timeout:)`.
    package static func connect(to address: HostPort, timeout: Duration) throws(NetError) -> TCPConnection {
        try connect(host: address.host, port: address.port, timeout: timeout)
    }

    private static func connect(to address: SocketAddress, deadline: ContinuousClock.Instant,
                                target: HostPort) throws(NetError) -> Int32 {
        let fd = try makeSocket(family: address.family)
        do throws(NetError) {
            configure(fd)
            try setNonBlocking(fd, true)
            var address = address
            let result = withUnsafePointer(to: &address.storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, address.length) }
            }
            var code: Int32 = result == 0 ? 0 : errno
            if code == EINPROGRESS || code == EINTR {
                guard try SocketFD.wait(fd, for: Int16(POLLOUT), until: deadline, operation: "poll") else {
                    throw NetError.timedOut("connecting to \(target): no answer in time")
                }
                var length = socklen_t(MemoryLayout<Int32>.size)
                code = 0
                guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else {
                    throw systemError("getsockopt(SO_ERROR)")
                }
            }
            if code != 0 {
                let reason = code == ECONNREFUSED
                    ? "connection refused (nothing is listening on port \(target.port))"
                    : errnoText(code)
                throw NetError.unreachable(address: target.description, reason: reason)
            }
            try setNonBlocking(fd, false)
            return fd
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
    }

    /// `TCP_NODELAY`, and bounds on what the kernel holds for the peer; best effort (a
    /// refusal only costs speed).
    ///
    /// The buffer sizes are left to the kernel's autotuning (`tcp_rmem`, `tcp_wmem`), which
    /// grows them with the connection's throughput: fixed 256 KiB buffers (SO_SNDBUF and
    /// SO_RCVBUF turn autotuning off) kept both ends waking for each quarter MiB, and a
    /// 1 GiB send over loopback took 1.95 s against 1.72 s autotuned (medians of 5
    /// interleaved pairs, the same CPU-s). Two options keep what autotuning lets pile up in
    /// the kernel near what the fixed buffers allowed:
    /// - `TCP_NOTSENT_LOWAT`: a write waits while `unsentLimit` bytes are not sent yet.
    ///   A 4 MiB send buffer full of unsent bytes would delay an urgent frame behind it
    ///   (seconds on a slow link) and space out the completed writes by which a peer that
    ///   stopped reading is told apart from a slow one (`SessionFlow`).
    /// - `TCP_WINDOW_CLAMP`, set before the handshake: the window scale is negotiated for
    ///   `windowLimit`, so the largest window we can ever advertise is 65,535 << 7 = 8 MiB,
    ///   and a peer cannot park more than that in our receive buffer while we do not read
    ///   it (autotuning alone negotiates scale 10 here and allows 32 MiB, `tcp_rmem`'s
    ///   maximum). Autotuning may raise the clamp itself later, not the scale.
    static func configure(_ fd: Int32) {
        try? setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1, "TCP_NODELAY")
        try? setOption(fd, Int32(IPPROTO_TCP), Int32(TCP_NOTSENT_LOWAT), unsentLimit, "TCP_NOTSENT_LOWAT")
        try? setOption(fd, Int32(IPPROTO_TCP), Int32(TCP_WINDOW_CLAMP), windowLimit, "TCP_WINDOW_CLAMP")
    }

    /// Unsent bytes the kernel takes before a write waits (`TCP_NOTSENT_LOWAT`).
    static let unsentLimit: Int32 = 256 * 1024
    /// The receive window the window scale is negotiated for (`TCP_WINDOW_CLAMP`).
    static let windowLimit: Int32 = 4 * 1024 * 1024

    /// The addresses `host` names, for a stream socket on `port`.
    static func resolve(host: String, port: UInt16, passive: Bool) throws(NetError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else {
            let reason = status == EAI_SYSTEM ? errnoText(errno) : String(cString: gai_strerror(status))
            throw .unreachable(address: HostPort(host: host, port: port).description, reason: reason)
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry = list
        while let current = entry {
            if let address = current.pointee.ai_addr {
                addresses.append(SocketAddress(copying: address, length: current.pointee.ai_addrlen))
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }

    package func read(maxCount: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8] {
        try socket.read(maxCount: maxCount, deadline: deadline, peer: remoteDescription)
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant?) throws(NetError) -> Int {
        try socket.read(into: buffer, deadline: deadline, peer: remoteDescription)
    }

    package func write(_ bytes: [UInt8]) throws(NetError) {
        try socket.write(bytes, peer: remoteDescription)
    }

    package func write(_ bytes: UnsafeRawBufferPointer) throws(NetError) {
        try socket.write(bytes, peer: remoteDescription)
    }

    package func shutdownWrite() {
        socket.shutdownWrite()
    }

    /// A write that cannot hand any byte to the peer for `timeout` fails with `timedOut`
    /// (and so fails the channel over it): a peer that stops reading never blocks a sender
    /// for longer.
    package func setSendTimeout(_ timeout: Duration) {
        try? socket.withFD("setting a send timeout") { fd throws(NetError) in setSocketSendTimeout(fd, timeout) }
    }

    package func close() {
        socket.close()
    }
}
