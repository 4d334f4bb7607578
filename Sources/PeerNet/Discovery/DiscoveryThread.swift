internal import Glibc
internal import Synchronization

/// A POSIX thread running `body` once. Discovery uses dedicated threads for its blocking
/// sockets (never the Swift concurrency pool). A thread created here is a child of the
/// creating thread, so it also inherits that thread's network namespace on Linux: the
/// tests rely on this to keep every mDNS socket inside a namespace of their own.
final class DiscoveryThread: Sendable {
    private let handle: Mutex<pthread_t?>
    private let joined = Mutex(false)

    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    init(_ body: @escaping @Sendable () -> Void) throws(NetError) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        guard result == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            throw systemError("pthread_create", result)
        }
        handle = Mutex(thread)
    }

    /// Whether the caller is this thread.
    var isCurrent: Bool {
        guard let thread = handle.withLock({ $0 }) else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// Waits for the thread to end (once; later calls return at once). Must not be called
    /// from the thread itself (it then detaches instead).
    func join() {
        let thread: pthread_t? = joined.withLock { done in
            guard !done else { return nil }
            done = true
            return handle.withLock { $0 }
        }
        guard let thread else { return }
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}

/// A pipe used to wake a thread blocked in `poll`.
final class WakePipe: Sendable {
    let readFD: Int32
    let writeFD: Int32

    init() throws(NetError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw systemError("pipe") }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        readFD = fds[0]
        writeFD = fds[1]
    }

    deinit {
        _ = Glibc.close(readFD)
        _ = Glibc.close(writeFD)
    }

    func wake() {
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
    }

    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readFD, &buffer, 64) > 0 {}
    }
}
