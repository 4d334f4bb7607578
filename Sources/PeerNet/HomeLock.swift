internal import Glibc
internal import Synchronization

/// An exclusive lock on a node home, so that only one daemon runs on it: `flock` on a lock
/// file that holds the owner's PID.
///
/// The kernel drops the lock when the process dies, so a lock file left behind by a crash
/// never blocks the next daemon. The file itself is never deleted (deleting lock files
/// lets two processes lock two different files of the same name).
///
/// `Sendable`: the descriptor and path are immutable, and an `Atomic` makes `release()`
/// run once.
package final class HomeLock: Sendable {
    /// The lock file.
    package let path: String
    private let fd: Int32
    private let released = Atomic<Bool>(false)

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    /// Takes the lock at `path` (creating the file, mode 0600) and writes this process's
    /// PID into it. Fails at once if another process, or another `HomeLock` in this one,
    /// holds it, naming the holder's PID when it is known.
    package static func acquire(path: String) throws(NetError) -> HomeLock {
        var fd: Int32
        repeat {
            fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        } while fd < 0 && errno == EINTR
        guard fd >= 0 else { throw systemError("open lock file \(path)") }
        var locked: Int32
        repeat {
            locked = flock(fd, LOCK_EX | LOCK_NB)
        } while locked != 0 && errno == EINTR
        guard locked == 0 else {
            let code = errno
            defer { _ = Glibc.close(fd) }
            guard code == EWOULDBLOCK else { throw systemError("lock \(path)", code) }
            let holder = readPID(fd).map { "another syncpeer daemon (pid \($0)) is running on this home" }
                ?? "another syncpeer daemon is running on this home"
            throw .system(operation: "lock \(path)", reason: holder)
        }
        let pid = Array("\(getpid())\n".utf8)
        let written = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard ftruncate(fd, off_t(pid.count)) == 0, written == pid.count else {
            let error = systemError("write lock file \(path)")
            _ = Glibc.close(fd)
            throw error
        }
        return HomeLock(path: path, fd: fd)
    }

    /// The PID written in a lock file, if it holds one.
    private static func readPID(_ fd: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: bytes[..<count], as: UTF8.self)
        return Int32(text.prefix { $0 != "\n" })
    }

    /// Empties the lock file and releases the lock. Idempotent; also done by `deinit`.
    package func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = ftruncate(fd, 0)
        _ = flock(fd, LOCK_UN)
        _ = Glibc.close(fd)
    }

    deinit {
        release()
    }
}
