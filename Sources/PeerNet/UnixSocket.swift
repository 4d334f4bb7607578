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
///
/// Descriptors a peer passes (`SCM_RIGHTS`, see `write(_:passing:)`) arrive with the bytes
/// they were sent with; every read keeps them (at most `maxPassedDescriptors`, others are
/// closed at once) until `takeDescriptor()` hands them out. Those never taken are closed
/// with the connection.
package final class UnixConnection: ByteStream {
    let socket: SocketFD
    /// The socket path (the listener's path on the accepting side).
    package let path: String
    /// Descriptors received and not yet taken.
    private let passed = Mutex<[Int32]>([])
    /// Descriptors kept for `takeDescriptor` at most.
    package static let maxPassedDescriptors = 4

    init(fd: Int32, path: String) {
        socket = SocketFD(fd)
        self.path = path
    }

    /// The socket path, or "socketpair".
    package var remoteDescription: String { path }

    /// Connects to the listener at `path`. Throws `NetError.unreachable` when no socket is
    /// there or nothing listens on it, and `NetError.timedOut` when the listener does not
    /// take the connection within `timeout`.
    package static func connect(path: String, timeout: Duration = .seconds(10)) throws(NetError) -> UnixConnection {
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

    package func read(maxCount: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8] {
        precondition(maxCount > 0, "read(maxCount:) needs a positive count")
        var bytes = [UInt8](repeating: 0, count: maxCount)
        let result = bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(NetError) in try read(into: buffer, deadline: deadline) }
        }
        let count = try result.get()
        // Do not let a few bytes pin a large allocation in the caller's hands.
        return maxCount > 4096 && count < maxCount / 4 ? Array(bytes[..<count]) : Array(bytes.prefix(count))
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant?) throws(NetError) -> Int {
        try socket.receiveMessage(into: buffer, deadline: deadline, peer: path) { fd in
            let kept = passed.withLock { list -> Bool in
                guard list.count < Self.maxPassedDescriptors else { return false }
                list.append(fd)
                return true
            }
            if !kept { _ = Glibc.close(fd) }
        }
    }

    /// Whether the peer closed its end (or the connection failed), without reading anything:
    /// for a server busy with a long request to notice a client that went away.
    package var peerHungUp: Bool {
        (try? socket.withFD("poll") { fd throws(NetError) -> Bool in
            let readHangUp: Int16 = 0x2000  // POLLRDHUP (Linux; Glibc hides it behind _GNU_SOURCE)
            var pfd = pollfd(fd: fd, events: readHangUp, revents: 0)
            guard poll(&pfd, 1, 0) > 0 else { return false }
            return pfd.revents & (readHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0
        }) ?? true
    }

    /// The oldest descriptor the peer passed and nobody took yet; the caller owns it.
    package func takeDescriptor() -> Int32? {
        passed.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }

    /// Writes every byte, passing a duplicate of `descriptor` with the first of them
    /// (`SCM_RIGHTS`): the peer's `takeDescriptor()` gets it once it read those bytes.
    package func write(_ bytes: [UInt8], passing descriptor: Int32) throws(NetError) {
        precondition(!bytes.isEmpty, "a descriptor travels with at least one byte")
        let sent = try socket.withFD("writing to \(path): the connection was closed") { fd throws(NetError) -> Int in
            try sendWithDescriptor(fd, bytes, descriptor, peer: path)
        }
        if sent < bytes.count { try write(Array(bytes[sent...])) }
    }

    package func write(_ bytes: [UInt8]) throws(NetError) {
        try socket.write(bytes, peer: path)
    }

    package func write(_ bytes: UnsafeRawBufferPointer) throws(NetError) {
        try socket.write(bytes, peer: path)
    }

    package func shutdownWrite() {
        socket.shutdownWrite()
    }

    /// A write that cannot hand any byte to the peer for `timeout` fails with `timedOut`
    /// (a client that stops reading never blocks its writer for longer).
    package func setSendTimeout(_ timeout: Duration) {
        try? socket.withFD("setting a send timeout") { fd throws(NetError) in setSocketSendTimeout(fd, timeout) }
    }

    package func close() {
        socket.close()
        for fd in passed.withLock({ list -> [Int32] in defer { list.removeAll() }; return list }) { _ = Glibc.close(fd) }
    }

    deinit {
        for fd in passed.withLock({ $0 }) { _ = Glibc.close(fd) }
    }

    /// Whether the other end has closed (or shut down its writing side), waiting at most
    /// `timeout` for it; does not consume anything that is readable. A closed connection
    /// counts as hung up.
    package func peerHasHungUp(within timeout: Duration) -> Bool {
        let milliseconds = Int32(max(0, timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        let result: Bool? = try? socket.withFD("polling") { fd throws(NetError) in
            // POLLRDHUP (Linux, 0x2000) is not in the Glibc module: the peer shut down writing.
            let peerClosed: Int16 = 0x2000
            var entry = pollfd(fd: fd, events: peerClosed, revents: 0)
            let n = poll(&entry, 1, milliseconds)
            if n <= 0 { return false }
            return entry.revents & (peerClosed | Int16(POLLHUP | POLLERR | POLLNVAL)) != 0
        }
        return result ?? true
    }
}

// MARK: - Passing descriptors (SCM_RIGHTS)

/// `CMSG_ALIGN`: control messages are aligned to `size_t`.
private func cmsgAlign(_ length: Int) -> Int {
    let unit = MemoryLayout<Int>.size
    return (length + unit - 1) & ~(unit - 1)
}

private let cmsgHeaderSize = cmsgAlign(MemoryLayout<cmsghdr>.size)

/// One `sendmsg` of `bytes` with `descriptor` attached; returns how many bytes it took.
private func sendWithDescriptor(_ fd: Int32, _ bytes: [UInt8], _ descriptor: Int32, peer: String) throws(NetError) -> Int {
    let space = cmsgHeaderSize + cmsgAlign(MemoryLayout<Int32>.size)
    var control = [UInt8](repeating: 0, count: space)
    var bytes = bytes
    let result: Int = control.withUnsafeMutableBytes { controlBuffer in
        var header = cmsghdr()
        header.cmsg_len = cmsgHeaderSize + MemoryLayout<Int32>.size
        header.cmsg_level = SOL_SOCKET
        header.cmsg_type = Int32(SCM_RIGHTS)
        controlBuffer.storeBytes(of: header, toByteOffset: 0, as: cmsghdr.self)
        controlBuffer.storeBytes(of: descriptor, toByteOffset: cmsgHeaderSize, as: Int32.self)
        return bytes.withUnsafeMutableBytes { data in
            var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var message = msghdr()
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                message.msg_control = controlBuffer.baseAddress
                message.msg_controllen = space
                while true {
                    let n = sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
                    if n >= 0 || errno != EINTR { return n }
                }
            }
        }
    }
    guard result >= 0 else { throw systemError("sendmsg to \(peer)") }
    return result
}

extension SocketFD {
    /// Like `read(into:deadline:peer:)`, with `recvmsg`: descriptors passed with the bytes
    /// go to `received` (close-on-exec set), in order.
    func receiveMessage(into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant?,
                        peer what: @autoclosure () -> String, received: (Int32) -> Void) throws(NetError) -> Int {
        precondition(buffer.count > 0, "read(into:) needs room for at least one byte")
        return try withFD("reading from \(what()): the connection was closed") { fd throws(NetError) -> Int in
            let space = cmsgHeaderSize + cmsgAlign(MemoryLayout<Int32>.size * UnixConnection.maxPassedDescriptors)
            var control = [UInt8](repeating: 0, count: space)
            while true {
                if let deadline {
                    guard try SocketFD.wait(fd, for: Int16(POLLIN), until: deadline, operation: "poll") else {
                        throw .timedOut("no data from \(what()) before the deadline")
                    }
                }
                let flags = Int32(MSG_CMSG_CLOEXEC) | (deadline == nil ? 0 : Int32(MSG_DONTWAIT))
                let (n, controlLength): (Int, Int) = control.withUnsafeMutableBytes { controlBuffer in
                    var vector = iovec(iov_base: buffer.baseAddress, iov_len: buffer.count)
                    return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                        var message = msghdr()
                        message.msg_iov = vectorPointer
                        message.msg_iovlen = 1
                        message.msg_control = controlBuffer.baseAddress
                        message.msg_controllen = space
                        let n = recvmsg(fd, &message, flags)
                        return (n, n >= 0 ? Int(message.msg_controllen) : 0)
                    }
                }
                if n >= 0 {
                    var offset = 0
                    control.withUnsafeBytes { raw in
                        while offset + cmsgHeaderSize <= controlLength {
                            let header = raw.loadUnaligned(fromByteOffset: offset, as: cmsghdr.self)
                            let length = Int(header.cmsg_len)
                            guard length >= cmsgHeaderSize, offset + length <= controlLength else { break }
                            if header.cmsg_level == SOL_SOCKET && header.cmsg_type == Int32(SCM_RIGHTS) {
                                let count = (length - cmsgHeaderSize) / MemoryLayout<Int32>.size
                                for i in 0..<count {
                                    received(raw.loadUnaligned(fromByteOffset: offset + cmsgHeaderSize + i * 4, as: Int32.self))
                                }
                            }
                            offset += cmsgAlign(length)
                        }
                    }
                    return n
                }
                if let failure = SocketFD.readFailure(errno, peer: what()) { throw failure }
            }
        }
    }
}

/// Two connected Unix-domain stream sockets (`socketpair`): an in-process pipe with
/// socket semantics, for tests and for wiring components together.
package func socketPair() throws(NetError) -> (UnixConnection, UnixConnection) {
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
package final class UnixListener: Sendable {
    let socket: SocketFD
    /// The socket's path.
    package let path: String
    private let device: UInt
    private let inode: UInt
    private let unlinked = Atomic<Bool>(false)

    package init(path: String, backlog: Int32 = 64) throws(NetError) {
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
    package func accept() throws(NetError) -> UnixConnection {
        let (fd, _) = try acceptConnection(socket, what: path)
        return UnixConnection(fd: fd, path: path)
    }

    /// Stops listening, wakes a blocked `accept()` and removes the socket file (if it is
    /// still this listener's). Idempotent.
    package func close() {
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
