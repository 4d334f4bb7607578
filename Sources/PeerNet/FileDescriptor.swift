internal import Glibc
internal import Synchronization

/// The text of an `errno` value, e.g. "Connection refused".
func errnoText(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return String(cString: text)
}

/// `NetError.system` for the current `errno`.
func systemError(_ operation: String, _ code: Int32 = errno) -> NetError {
    .system(operation: operation, reason: errnoText(code))
}

/// Milliseconds until `deadline` for `poll`: -1 without a deadline, 0 once it has passed,
/// rounded up so that `poll` never wakes just before the deadline.
func pollTimeout(until deadline: ContinuousClock.Instant?) -> Int32 {
    guard let deadline else { return -1 }
    let remaining = deadline - .now
    if remaining <= .zero { return 0 }
    let (seconds, attoseconds) = remaining.components
    let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    return Int32(clamping: ms)
}

/// One socket descriptor, shared by the TCP and Unix-domain types: the read, write,
/// poll and close logic is written once, here.
///
/// Why it is `Sendable`:
/// - `fd` is immutable.
/// - Every use of `fd` happens between `beginUse` and `endUse`, counted under `state`'s
///   `Mutex`; `close()` only marks the socket closing and calls `shutdown(SHUT_RDWR)`,
///   which wakes any thread blocked in `poll`, `recv`, `send` or `accept` on it. The
///   descriptor itself is released by whichever thread ends the last use, so it can
///   never be closed while another thread still uses it, and a number the kernel has
///   reused for another file is never touched.
/// - Writes are serialised by `writeLock`, so concurrent writers never interleave bytes.
final class SocketFD: Sendable {
    let fd: Int32

    private struct State {
        var users = 0
        var closing = false
        var released = false
    }

    private let state = Mutex(State())
    private let writeLock = Mutex(())

    /// Takes ownership of `fd`.
    init(_ fd: Int32) {
        self.fd = fd
    }

    deinit {
        // No other reference exists any more, so nobody can be using the descriptor.
        let mustClose = state.withLock { state -> Bool in
            let mustClose = !state.released
            state.released = true
            return mustClose
        }
        if mustClose { _ = Glibc.close(fd) }
    }

    /// Whether `close()` has been called.
    var isClosed: Bool { state.withLock { $0.closing } }

    /// Runs `body` with the descriptor, which stays open until it returns.
    /// Throws `NetError.closed(what)` when the socket has already been closed.
    func withFD<Result>(_ what: @autoclosure () -> String,
                        _ body: (Int32) throws(NetError) -> Result) throws(NetError) -> Result {
        let usable = state.withLock { state -> Bool in
            guard !state.closing else { return false }
            state.users += 1
            return true
        }
        guard usable else { throw .closed(what()) }
        defer { endUse() }
        return try body(fd)
    }

    private func endUse() {
        let mustClose = state.withLock { state -> Bool in
            state.users -= 1
            guard state.closing, state.users == 0, !state.released else { return false }
            state.released = true
            return true
        }
        if mustClose { _ = Glibc.close(fd) }
    }

    /// Shuts both directions down (waking blocked threads) and releases the descriptor
    /// once no thread uses it. Idempotent.
    func close() {
        let first = state.withLock { state -> Bool in
            guard !state.closing else { return false }
            state.closing = true
            state.users += 1  // close itself is a use: the fd stays valid for shutdown
            return true
        }
        guard first else { return }
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
        endUse()
    }

    /// Stops sending; the peer reads end of stream. Does nothing once closed.
    func shutdownWrite() {
        try? withFD("shutdown") { fd throws(NetError) in
            _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        }
    }

    // MARK: Reading and writing

    /// Waits until `fd` is ready for `events`. Returns false when `deadline` passed first.
    static func wait(_ fd: Int32, for events: Int16, until deadline: ContinuousClock.Instant?,
                     operation: String) throws(NetError) -> Bool {
        while true {
            var pfd = pollfd(fd: fd, events: events, revents: 0)
            let timeout = pollTimeout(until: deadline)
            let ready = poll(&pfd, 1, timeout)
            if ready > 0 { return true }
            if ready == 0 {
                if timeout == 0 { return false }
                continue  // woke a little early: poll again with what remains
            }
            let code = errno
            if code == EINTR { continue }
            throw systemError(operation, code)
        }
    }

    /// Reads at most `maxCount` bytes; empty at end of stream. `what` names the peer (only
    /// evaluated for an error).
    func read(maxCount: Int, deadline: ContinuousClock.Instant?,
              peer what: @autoclosure () -> String) throws(NetError) -> [UInt8] {
        precondition(maxCount > 0, "read(maxCount:) needs a positive count")
        var result: Result<Int, NetError> = .success(0)
        var bytes = [UInt8](unsafeUninitializedCapacity: maxCount) { buffer, count in
            result = Result { () throws(NetError) in
                try read(into: UnsafeMutableRawBufferPointer(buffer), deadline: deadline, peer: what())
            }
            count = (try? result.get()) ?? 0
        }
        _ = try result.get()
        // Do not let a few bytes pin a large allocation in the caller's hands.
        if maxCount > 4096, bytes.count < maxCount / 4 { bytes = Array(bytes) }
        return bytes
    }

    /// Reads at most `buffer.count` (> 0) bytes into `buffer`; returns how many, 0 at end
    /// of stream.
    func read(into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant?,
              peer what: @autoclosure () -> String) throws(NetError) -> Int {
        precondition(buffer.count > 0, "read(into:) needs room for at least one byte")
        return try withFD("reading from \(what()): the connection was closed") { fd throws(NetError) -> Int in
            while true {
                if let deadline {
                    guard try SocketFD.wait(fd, for: Int16(POLLIN), until: deadline, operation: "poll") else {
                        throw .timedOut("no data from \(what()) before the deadline")
                    }
                }
                let flags = deadline == nil ? Int32(0) : Int32(MSG_DONTWAIT)
                let n = recv(fd, buffer.baseAddress, buffer.count, flags)
                if n >= 0 { return n }
                if let failure = SocketFD.readFailure(errno, peer: what()) { throw failure }
            }
        }
    }

    /// What a failed read's `errno` means: nil to try again (interrupted, or nothing there
    /// yet after a poll), `.closed` when the peer went away, otherwise a system error.
    static func readFailure(_ code: Int32, peer what: @autoclosure () -> String) -> NetError? {
        switch code {
        case EINTR, EAGAIN, EWOULDBLOCK:
            return nil
        case ECONNRESET, ETIMEDOUT, EPIPE, ENOTCONN, ESHUTDOWN:
            return .closed("reading from \(what()): \(errnoText(code))")
        default:
            return systemError("recv from \(what())", code)
        }
    }

    /// Writes every byte, in as many `send` calls as it takes. `what` names the peer (only
    /// evaluated for an error).
    func write(_ bytes: [UInt8], peer what: @autoclosure () -> String) throws(NetError) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(NetError) in try write(raw, peer: what()) }
        }
        try result.get()
    }

    /// Writes every byte of `bytes`, like the array variant.
    func write(_ bytes: UnsafeRawBufferPointer, peer what: @autoclosure () -> String) throws(NetError) {
        try withFD("writing to \(what()): the connection was closed") { fd throws(NetError) in
            let code = writeLock.withLock { _ -> Int32 in
                var offset = 0
                while offset < bytes.count {
                    let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                    if n >= 0 {
                        offset += n
                    } else if errno != EINTR {
                        return errno
                    }
                }
                return 0
            }
            switch code {
            case 0:
                return
            case EPIPE, ECONNRESET, ENOTCONN, ETIMEDOUT, ESHUTDOWN:
                throw .closed("writing to \(what()): \(errnoText(code))")
            case EAGAIN:  // == EWOULDBLOCK on Linux
                // SO_SNDTIMEO expired (see `setSocketSendTimeout`): the peer read nothing for that long.
                throw .timedOut("writing to \(what()): the peer stopped reading")
            default:
                throw systemError("send to \(what())", code)
            }
        }
    }
}

// MARK: Descriptor helpers

/// Creates a socket with close-on-exec set.
func makeSocket(family: Int32, operation: String = "socket") throws(NetError) -> Int32 {
    let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw systemError(operation) }
    return fd
}

/// Sets or clears `O_NONBLOCK`.
func setNonBlocking(_ fd: Int32, _ on: Bool) throws(NetError) {
    let flags = fcntl(fd, F_GETFL)
    guard flags >= 0 else { throw systemError("fcntl(F_GETFL)") }
    let wanted = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
    guard fcntl(fd, F_SETFL, wanted) == 0 else { throw systemError("fcntl(F_SETFL)") }
}

/// Marks a descriptor close-on-exec (`accept4` is not available, so after `accept`).
func setCloseOnExec(_ fd: Int32) {
    let flags = fcntl(fd, F_GETFD)
    if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
}

/// Sets `SO_SNDTIMEO`: a blocking `send` that can hand no byte to the kernel for that long
/// fails with `EAGAIN`; it also bounds a blocking `connect` on a Unix socket whose
/// listener's queue is full. `nil` clears it.
func setSocketSendTimeout(_ fd: Int32, _ timeout: Duration?) {
    var value = timeval(tv_sec: 0, tv_usec: 0)
    if let timeout {
        let (seconds, attoseconds) = timeout.components
        value.tv_sec = Int(seconds)
        value.tv_usec = Int(attoseconds / 1_000_000_000_000)
        if value.tv_sec == 0 && value.tv_usec == 0 { value.tv_usec = 1 }
    }
    _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
}

/// Sets an integer socket option.
func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32, _ label: String) throws(NetError) {
    var value = value
    guard setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
        throw systemError("setsockopt(\(label))")
    }
}

/// Accepts one connection on a listening socket, retrying on interruptions and on
/// connections aborted before they were accepted. Returns the new descriptor (with
/// close-on-exec set) and the peer's address.
func acceptConnection(_ listener: SocketFD, what: String) throws(NetError) -> (Int32, SocketAddress) {
    try listener.withFD("accepting on \(what): the listener was closed") { fd throws(NetError) -> (Int32, SocketAddress) in
        while true {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(fd, $0, &length) }
            }
            if client >= 0 {
                setCloseOnExec(client)
                return (client, SocketAddress(storage: storage, length: length))
            }
            let code = errno
            if listener.isClosed { throw .closed("accepting on \(what): the listener was closed") }
            switch code {
            case EINTR, ECONNABORTED, EPROTO:
                continue
            case EINVAL, EBADF:
                throw .closed("accepting on \(what): the listener was closed")
            default:
                throw systemError("accept on \(what)", code)
            }
        }
    }
}
