internal import Glibc

/// A listening TCP socket.
///
/// `Sendable` for the same reasons as `TCPConnection`: immutable properties around a
/// `SocketFD`. `close()` from any thread wakes a thread blocked in `accept()`, which then
/// throws `NetError.closed`.
package final class TCPListener: Sendable {
    let socket: SocketFD
    /// The numeric address the listener is bound to.
    package let host: String
    /// The port actually bound (the one the kernel chose when 0 was asked for).
    package let port: UInt16

    /// Binds to `host` (a numeric address or a name) and `port` (0 = any free port), with
    /// `SO_REUSEADDR`, and listens with a queue of `backlog` pending connections. The IPv6
    /// wildcard `::` takes IPv4 connections as well (dual stack), and on a kernel without
    /// IPv6 it means the IPv4 wildcard 0.0.0.0.
    package init(host: String, port: UInt16, backlog: Int32 = 64) throws(NetError) {
        let requested = HostPort(host: host, port: port)
        guard !host.isEmpty else { throw .invalidAddress("empty host to listen on (expected host:port)") }
        let wildcard6 = host == "::"
        guard var address = try TCPConnection.resolve(host: host, port: port, passive: true).first else {
            throw .invalidAddress("\(requested) has no address to listen on")
        }
        var fd = Glibc.socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd < 0, wildcard6, errno == EAFNOSUPPORT, let any4 = try TCPConnection.resolve(host: "0.0.0.0", port: port, passive: true).first {
            address = any4
            fd = try makeSocket(family: address.family)
        }
        guard fd >= 0 else { throw systemError("socket") }
        do throws(NetError) {
            try setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR")
            if wildcard6, address.isIPv6 { try setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 0, "IPV6_V6ONLY") }
            // Set before listen so that accepted sockets inherit them.
            TCPConnection.configure(fd)
            var address = address
            let bound = withUnsafePointer(to: &address.storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, address.length) }
            }
            guard bound == 0 else {
                let code = errno
                let reason = code == EADDRINUSE ? "the port is already in use" : errnoText(code)
                throw NetError.system(operation: "listen on \(requested)", reason: reason)
            }
            guard listen(fd, backlog) == 0 else { throw systemError("listen on \(requested)") }
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
        socket = SocketFD(fd)
        let local = SocketAddress.of(fd, remote: false)
        self.host = local?.host ?? host
        self.port = local?.port ?? port
    }

    /// Convenience for a parsed "host:port".
    package convenience init(address: HostPort, backlog: Int32 = 64) throws(NetError) {
        try self.init(host: address.host, port: address.port, backlog: backlog)
    }

    /// "host:port" the listener is bound to.
    package var localDescription: String {
        HostPort(host: host, port: port).description
    }

    /// Waits for the next connection. Throws `NetError.closed` once `close()` is called.
    package func accept() throws(NetError) -> TCPConnection {
        let (fd, remote) = try acceptConnection(socket, what: localDescription)
        TCPConnection.configure(fd)
        return TCPConnection(fd: fd, remote: remote)
    }

    /// Stops listening and wakes a blocked `accept()`. Idempotent.
    package func close() {
        socket.close()
    }
}
