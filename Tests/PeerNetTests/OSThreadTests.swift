import Dispatch
import Glibc
import PeerNet
import Synchronization
import Testing

/// OSThread: Foundation's `Thread` on pthreads (issue 42.6: the modules linked into
/// `syncpeer` leave Foundation).
struct OSThreadTests {
    @Test func theBodyRunsOnANewThreadThatCarriesItsName() {
        let seen = Mutex<(otherThread: Bool, name: String)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let caller = pthread_self()
        OSThread.start(name: "syncpeer-test-thread") {
            let name = Self.threadName()
            seen.withLock { $0 = (pthread_equal(pthread_self(), caller) == 0, name) }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success, "the body never ran")
        let result = seen.withLock { $0 }
        #expect(result?.otherThread == true, "the body ran on the caller's thread")
        // The system keeps 15 bytes of a thread's name.
        #expect(result?.name == "syncpeer-test-t", "\(String(describing: result))")
    }

    /// The calling thread's name as the kernel holds it.
    static func threadName() -> String {
        let fd = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
    }

    @Test func sleepWaitsAtLeastTheDurationGiven() {
        let start = ContinuousClock.now
        OSThread.sleep(for: .milliseconds(120))
        #expect(ContinuousClock.now - start >= .milliseconds(120))
    }
}
