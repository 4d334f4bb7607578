internal import Glibc

/// A lock with a condition to wait on, on pthreads: what Foundation's `NSCondition` did for
/// the engine's blocking readers, so that no module needs Foundation for it (issue 42.6).
/// Waits measure time on the monotonic clock.
///
/// `@unchecked Sendable`: a wrapper of a pthread mutex and condition variable, which are made
/// for use from any thread; they live at fixed addresses of their own for the object's life.
package final class OSCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    /// Wakes every waiter (call with the lock held).
    package func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits (with the lock held; it is released meanwhile) for a broadcast or `timeout`,
    /// whichever comes first; a wake-up may be spurious, so check what you wait for again.
    package func wait(for timeout: Duration) {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let (seconds, attoseconds) = timeout.components
        var nanoseconds = Int(now.tv_nsec) + Int(attoseconds / 1_000_000_000)
        var deadline = timespec(tv_sec: now.tv_sec + Int(seconds) + nanoseconds / 1_000_000_000, tv_nsec: 0)
        nanoseconds %= 1_000_000_000
        deadline.tv_nsec = nanoseconds
        _ = pthread_cond_timedwait(condition, mutex, &deadline)
    }
}
