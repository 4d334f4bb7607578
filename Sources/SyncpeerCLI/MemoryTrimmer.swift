#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import Dispatch
internal import Synchronization

/// Hands freed heap memory back to the kernel (`malloc_trim`) when the daemon's resident
/// size grows past `Policy.threshold`, checked every `Policy.interval` from creation until
/// `stop` (every `Policy.idleInterval` while the process is idle).
///
/// glibc keeps the free space between live heap blocks resident. How much of it there is
/// depends on the order in which threads allocate and free, so the same work peaks at very
/// different sizes: indexing 100,000 small files (make bench, index_100k) peaked at 72 MiB in
/// most runs and at 98–163 MiB in others, with the same ~72 MiB in use. A trim returns those
/// free pages; a block in use is never touched. Below the threshold only an idle daemon is
/// trimmed (once per growth, `Policy.idleThreshold`), so a transfer, whose buffers are reused
/// from the heap, pays nothing (1 GiB A-send: 46–62 MiB).
final class MemoryTrimmer: Sendable {
    /// When to trim (pure: tested alone).
    struct Policy {
        static let threshold = 80 << 20
        /// Once trimmed, the next trim waits until the resident size has grown this much above
        /// the lowest it has been since: memory really in use is not trimmed over and over.
        static let growth = 8 << 20
        /// At most one trim in this long, however the size swings.
        static let minimumGap: Duration = .milliseconds(500)
        /// Above the threshold, a trim at least this often even without growth: memory freed
        /// when a large piece of work ends stays resident, so the size alone never shows it
        /// (scanning 100,000 files left 194 MiB resident with 80 MiB in use, for good).
        static let settleGap: Duration = .seconds(5)

        /// Below the threshold, an idle daemon (`idleGap` with under `idleShare` of a core)
        /// above this size is trimmed once, and again only after it grew `growth` above what
        /// that trim left: the memory a large scan or pull freed (and the index's page cache)
        /// goes back when the work ends, not only past the threshold (issue 43, F: alice idled
        /// at 79 MiB after scanning 100,000 files, 53 MiB of it anonymous). A transfer is
        /// never idle, so it still pays nothing.
        static let idleThreshold = 40 << 20
        static let idleGap: Duration = .seconds(1)
        static let idleShare = 0.05

        /// Checks this often while the process works, and `idleInterval` apart once it has
        /// been idle `idleGap`: the next check after work starts again is that much later.
        /// (Checked ten times a second, an idle daemon's most frequent wakeup was this one:
        /// 300 reads of /proc/self/statm and getrusage calls each in 30 s.)
        static let interval: Duration = .milliseconds(100)
        static let idleInterval: Duration = .seconds(1)
        /// The time between checks now.
        private(set) var pace = interval

        /// The lowest resident size since the last trim (what that trim left, at first).
        private(set) var floor = 0
        private var lastTrim: ContinuousClock.Instant?
        /// The process's CPU time at the last check that told it, when that was, and the last
        /// check that found the process busy (or the first check).
        private var lastCPU: (cpu: Duration, at: ContinuousClock.Instant)?
        private var lastBusy: ContinuousClock.Instant?

        /// One check of a resident size of `resident` bytes at `now`, with the process's
        /// CPU time `cpu` so far (nil: unknown, never idle): calls `trim` (which returns the
        /// resident size after it, nil if unknown) when the last trim was `minimumGap` ago
        /// and either the size is above the threshold and `growth` above the floor or the
        /// last trim `settleGap` ago, or the process is idle above `idleThreshold` and
        /// `growth` above the floor. True if it trimmed.
        mutating func check(resident: Int, now: ContinuousClock.Instant, cpu: Duration? = nil, trim: () -> Int?) -> Bool {
            floor = lastTrim == nil ? 0 : min(floor, resident)
            let since = lastTrim.map { now - $0 }
            let idle = noteCPU(cpu, now: now)
            guard since.map({ $0 >= Self.minimumGap }) ?? true else { return false }
            let grown = resident >= floor + Self.growth
            guard resident > Self.threshold && (grown || since.map({ $0 >= Self.settleGap }) ?? true)
                    || idle && resident > Self.idleThreshold && grown else { return false }
            lastTrim = now
            floor = trim() ?? resident
            return true
        }

        /// The time between checks after one at `now`, when it changes (nil: unchanged).
        mutating func newPace(now: ContinuousClock.Instant) -> Duration? {
            let pace = lastBusy.map { now - $0 >= Self.idleGap } == true ? Self.idleInterval : Self.interval
            guard pace != self.pace else { return nil }
            self.pace = pace
            return pace
        }

        /// Notes the CPU time at `now`; whether the process has been idle for `idleGap`.
        private mutating func noteCPU(_ cpu: Duration?, now: ContinuousClock.Instant) -> Bool {
            guard let cpu else { return false }
            if lastBusy == nil { lastBusy = now }
            if let last = lastCPU, cpu - last.cpu > (now - last.at) * Self.idleShare { lastBusy = now }
            lastCPU = (cpu, now)
            return lastBusy.map { now - $0 >= Self.idleGap } ?? false
        }
    }

    private let queue = DispatchQueue(label: "syncpeer.memory-trim", qos: .utility)
    /// Set once in init (a dispatch source is not Sendable, so it lives behind a lock).
    private let timer: Mutex<(any DispatchSourceTimer)?>
    /// Read and written only by `check`, on `queue`.
    private let policy = Mutex(Policy())
    /// Called before each trim: frees what caches hold, so that the trim can return it.
    private let releaseCaches: @Sendable () -> Void

    /// Starts checking at once; `releaseCaches` runs before every trim.
    init(releaseCaches: @escaping @Sendable () -> Void = {}) {
        self.releaseCaches = releaseCaches
        let timer = DispatchSource.makeTimerSource(queue: queue)
        Self.schedule(timer, every: Policy.interval)
        self.timer = Mutex(timer)
        // Inside the lock: the handler is set before the timer runs; nothing here calls out.
        self.timer.withLock { timer in
            timer?.setEventHandler { [weak self] in self?.check() }
            timer?.activate()
        }
    }

    func stop() { timer.withLock { $0 }?.cancel() }

    /// Fires `timer` every `pace` from now.
    private static func schedule(_ timer: (any DispatchSourceTimer)?, every pace: Duration) {
        let interval = DispatchTimeInterval.milliseconds(Int(pace / .milliseconds(1)))
        timer?.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(20))
    }

    /// One check of the resident size (on `queue`, the timer's: one at a time). The policy is
    /// copied out and back so that the trim, which reads /proc, runs outside the lock.
    private func check() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let resident = Self.residentBytes() else { return }
        var policy = self.policy.withLock { $0 }
        let now = ContinuousClock.now
        _ = policy.check(resident: resident, now: now, cpu: Self.cpuTime()) {
            releaseCaches()
            _ = trimmerMallocTrim(0)
            return Self.residentBytes()
        }
        let pace = policy.newPace(now: now)
        self.policy.withLock { [policy] in $0 = policy }
        if let pace { Self.schedule(timer.withLock { $0 }, every: pace) }
    }

    /// The CPU time the process used so far (user and system, every thread).
    static func cpuTime() -> Duration? {
        var usage = rusage()
        guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return nil }
        func time(_ t: timeval) -> Duration { .seconds(Int64(t.tv_sec)) + .microseconds(Int64(t.tv_usec)) }
        return time(usage.ru_utime) + time(usage.ru_stime)
    }

    /// The process's resident size (`/proc/self/statm`), nil where there is none.
    static func residentBytes() -> Int? {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return residentBytes(statm: String(decoding: buffer[..<n], as: UTF8.self), pageSize: Int(sysconf(Int32(_SC_PAGESIZE))))
    }

    /// The resident size in a `statm` line ("size resident shared text lib data dt", in pages).
    static func residentBytes(statm: String, pageSize: Int) -> Int? {
        let fields = statm.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count >= 2, let pages = Int(fields[1]) else { return nil }
        return pages * pageSize
    }
}

/// malloc_trim(3) (<malloc.h> is not part of the Glibc module).
@_silgen_name("malloc_trim") private func trimmerMallocTrim(_ pad: Int) -> Int32
