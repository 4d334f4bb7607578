internal import Glibc
internal import Synchronization

/// The longest path `sockaddr_un` holds (108 bytes including the terminating NUL).
let maxUnixPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

/// A `sockaddr_un` for `path`, refusing paths the kernel cannot take.
func unixAddress(_ path: String) throws(NetError) -> sockaddr_un {
    guard !path.isEmpty else { throw .invalidAddress("empty Unix socket path") }
    let bytes = Array(path.utf8)
    guard !bytes.contains(0) else { throw .invalidAddress("Unix socket path contains a NUL byte: \(path)") }
    guard bytes.count <= maxUnixPathLength else {
        throw .invalidAddress("Unix socket path is \(bytes.count) bytes, over the limit of \(maxUnixPathLength): \(path)")
    }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { target in
        target.copyBytes(from: bytes)
    }
    return address
}

/// `connect` on a Unix socket; returns 0 or the `errno`.
private func connectUnix(_ fd: Int32, _ address: sockaddr_un) -> Int32 {
    var address = address
    let result = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    return result == 0 ? 0 : errno
}

/// A connection over a Unix-domain stream socket (the local control socket).
///
/// `Sendable` for the same reasons as `TCPConnection`: immutable properties around a
/// `SocketFD`, which serialises writes and closes the descriptor exactly once.
public final class UnixConnection: ByteStream {
    let socket: SocketFD
    /// The socket path (the listener's path on the accepting side).
    public let path: String

    init(fd: Int32, path: String) {
        socket = SocketFD(fd)
        self.path = path
    }

    /// The socket path, or "socketpair".
    public var remoteDescription: String { path }

    /// Connects to the listener at `path`. Throws `NetError.unreachable` when no socket is
    /// there or nothing listens on it, and `NetError.timedOut` when the listener does not
    /// take the connection within `timeout`.
    public static func connect(path: String, timeout: Duration = .seconds(10)) throws(NetError) -> UnixConnection {
        let address = try unixAddress(path)
        let fd = try makeSocket(family: AF_UNIX)
        setSocketSendTimeout(fd, timeout)
        var code: Int32
        repeat {
            code = connectUnix(fd, address)
        } while code == EINTR
        guard code == 0 else {
            _ = Glibc.close(fd)
            switch code {
            case ENOENT:
                throw .unreachable(address: path, reason: "no socket at this path (is the daemon running?)")
            case ECONNREFUSED:
                throw .unreachable(address: path, reason: "nothing is listening on this socket (a stale socket file?)")
            case EACCES, EPERM:
                throw .unreachable(address: path, reason: "permission denied")
            case ENOTDIR:
                throw .unreachable(address: path, reason: "a component of the path is not a directory")
            case EAGAIN, ETIMEDOUT:
                throw .timedOut("connecting to \(path): the listener did not accept in time")
            default:
                throw .unreachable(address: path, reason: errnoText(code))
            }
        }
        setSocketSendTimeout(fd, nil)
        return UnixConnection(fd: fd, path: path)
    }

    public func read(maxCount: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8] {
        try socket.read(maxCount: maxCount, deadline: deadline, peer: path)
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant?) throws(NetError) -> Int {
        try socket.read(into: buffer, deadline: deadline, peer: path)
    }

    public func write(_ bytes: [UInt8]) throws(NetError) {
        try socket.write(bytes, peer: path)
    }

    public func write(_ bytes: UnsafeRawBufferPointer) throws(NetError) {
        try socket.write(bytes, peer: path)
    }

    public func shutdownWrite() {
        socket.shutdownWrite()
    }

    /// A write that cannot hand any byte to the peer for `timeout` fails with `timedOut`
    /// (a client that stops reading never blocks its writer for longer).
    public func setSendTimeout(_ timeout: Duration) {
        try? socket.withFD("setting a send timeout") { fd throws(NetError) in setSocketSendTimeout(fd, timeout) }
    }

    public func close() {
        socket.close()
    }
}

/// Two connected Unix-domain stream sockets (`socketpair`): an in-process pipe with
/// socket semantics, for tests and for wiring components together.
public func socketPair() throws(NetError) -> (UnixConnection, UnixConnection) {
    var fds: [Int32] = [-1, -1]
    let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { throw systemError("socketpair") }
    return (UnixConnection(fd: fds[0], path: "socketpair"), UnixConnection(fd: fds[1], path: "socketpair"))
}

/// A listening Unix-domain socket: the daemon's control socket.
///
/// The socket file gets mode 0600. A socket file left behind by a process that is gone
/// is replaced; one that a live process still listens on is an error, and so is any other
/// kind of file at the path (it is never deleted). Finding out means connecting to the
/// socket, so a live listener sees that probe as a connection that ends at once.
/// `close()` removes the socket file if it is still the one this listener created.
///
/// `Sendable`: immutable properties, a `SocketFD`, and an `Atomic` that lets only one
/// `close()` unlink the file.
public final class UnixListener: Sendable {
    let socket: SocketFD
    /// The socket's path.
    public let path: String
    private let device: UInt
    private let inode: UInt
    private let unlinked = Atomic<Bool>(false)

    public init(path: String, backlog: Int32 = 64) throws(NetError) {
        let address = try unixAddress(path)
        try UnixListener.removeStaleSocket(at: path, address: address)
        let fd = try makeSocket(family: AF_UNIX)
        var identity = stat()
        do throws(NetError) {
            // The mode of the socket inode becomes the mode of the file bind creates,
            // so the file is never reachable by others, not even for an instant.
            guard fchmod(fd, 0o600) == 0 else { throw systemError("fchmod(\(path))") }
            var address = address
            let bound = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard bound == 0 else {
                let code = errno
                if code == EADDRINUSE {
                    throw NetError.system(operation: "listen on \(path)", reason: "another process is listening on \(path)")
                }
                throw NetError.system(operation: "bind to \(path)", reason: errnoText(code))
            }
            // Belt and braces for kernels that ignore the inode mode at bind.
            guard chmod(path, 0o600) == 0, stat(path, &identity) == 0 else {
                let error = systemError("chmod(\(path))")
                unlink(path)
                throw error
            }
            guard listen(fd, backlog) == 0 else {
                let error = systemError("listen on \(path)")
                unlink(path)
                throw error
            }
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
        socket = SocketFD(fd)
        self.path = path
        device = UInt(identity.st_dev)
        inode = UInt(identity.st_ino)
    }

    /// Removes a socket file nothing listens on any more; refuses a live one or a file
    /// that is not a socket.
    private static func removeStaleSocket(at path: String, address: sockaddr_un) throws(NetError) {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            let code = errno
            if code == ENOENT { return }
            throw systemError("stat(\(path))", code)
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw .system(operation: "listen on \(path)", reason: "the path exists and is not a socket; remove it or choose another path")
        }
        let probe = try makeSocket(family: AF_UNIX)
        defer { _ = Glibc.close(probe) }
        setSocketSendTimeout(probe, .seconds(1))
        let code = connectUnix(probe, address)
        switch code {
        case 0, EAGAIN:
            throw .system(operation: "listen on \(path)", reason: "another process is listening on \(path)")
        case ECONNREFUSED:
            guard unlink(path) == 0 || errno == ENOENT else { throw systemError("remove stale socket \(path)") }
        case ENOENT:
            return
        default:
            throw systemError("connect to existing socket \(path)", code)
        }
    }

    /// Waits for the next connection. Throws `NetError.closed` once `close()` is called.
    public func accept() throws(NetError) -> UnixConnection {
        let (fd, _) = try acceptConnection(socket, what: path)
        return UnixConnection(fd: fd, path: path)
    }

    /// Stops listening, wakes a blocked `accept()` and removes the socket file (if it is
    /// still this listener's). Idempotent.
    public func close() {
        socket.close()
        guard !unlinked.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var info = stat()
        if lstat(path, &info) == 0, UInt(info.st_dev) == device, UInt(info.st_ino) == inode {
            unlink(path)
        }
    }

    deinit {
        close()
    }
}
