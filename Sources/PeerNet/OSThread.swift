internal import Glibc

/// A thread of its own for blocking work (an accept loop, a socket's reads, a timer's
/// sleeps), started at once and never joined: what `Foundation.Thread { … }.start()` does,
/// on pthreads, so that a module needs no Foundation for it (issue 42.6).
package enum OSThread {
    /// Runs `body` on a new detached thread named `name` (the system keeps its first 15
    /// bytes: what `top -H`, `/proc/PID/task/TID/comm` and a debugger show).
    package static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, entry, start)
        guard created == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            fatalError("cannot start the thread \(name): \(String(cString: strerror(created)))")
        }
        pthread_detach(thread)
    }

    /// What a new thread runs first: its name, then its body.
    private static let entry: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? = { raw in
        let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
        nameThisThread(start.name)
        start.body()
        return nil
    }

    /// Names the calling thread (`pthread_setname_np` and `prctl` do not import into Swift:
    /// the kernel's file for it takes the same 15 bytes).
    private static func nameThisThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    /// Blocks the calling thread for `duration` (what `Thread.sleep(forTimeInterval:)` does).
    package static func sleep(for duration: Duration) {
        let (seconds, attoseconds) = duration.components
        guard seconds > 0 || attoseconds > 0 else { return }
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var left = timespec()
        while nanosleep(&request, &left) == -1 && errno == EINTR { request = left }
    }

    /// What the new thread runs, handed over through pthread_create's one pointer.
    private final class Start: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}
