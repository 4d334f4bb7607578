internal import Dispatch
internal import Glibc
internal import Synchronization

/// The watcher thread's state: made and set up by `FolderWatcher.init`, then handed to the
/// thread (`startThread(running:)` takes it `sending`), which alone touches it. Not Sendable:
/// what it shares with other threads is `FolderWatcher.shared` (through `owner`).
final class WatchLoop {
    static let mask = UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO
                             | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    let inotify: Int32
    let wakeRead: Int32
    let root: String
    let delayNs: Int64
    let maxDelayNs: Int64
    let quickDelayNs: Int64
    let settleDelayNs: Int64
    let watchLimit: Int?
    let onBatch: @Sendable (WatchBatch) -> Void
    weak var owner: FolderWatcher?

    /// Watch descriptor → relative directory path ("" for the root), and back.
    var directories: [Int32: String] = [:]
    var descriptors: [PathKey: Int32] = [:]
    var rootWd: Int32 = -1
    var limitReported = false

    // The batch being aggregated.
    var changed = Set<PathKey>()
    var renames: [(String, String)] = []
    var moves: [UInt32: (path: String, isDirectory: Bool, reportable: Bool)] = [:]
    var flags = Set<WatchChange>()   // .overflow, .rootGone, .watchLimitReached
    var firstEventNs: Int64 = 0
    var lastEventNs: Int64 = 0
    /// The batch began after a quiet period: it waits `quickDelayNs` without events, not `delayNs`.
    var quickBatch = false
    /// Paths of the batch written (or created as files) and not closed since, or deleted or
    /// moved away and not there again (an editor's save may put a new file there next): while
    /// there are any, a quick batch is not settled. Emptied with the batch.
    var unsettled = Set<PathKey>()
    /// The last event of any kind (the node's own writes too), for telling a quiet period.
    var lastActivityNs = Int64.min / 2
    var rootGone = false
    /// `.rootGone` was delivered: nothing more is reported.
    var finished = false

    init(inotify: Int32, wakeRead: Int32, root: String, delayNs: Int64, maxDelayNs: Int64, quickDelayNs: Int64,
         settleDelayNs: Int64, watchLimit: Int?, onBatch: @escaping @Sendable (WatchBatch) -> Void) {
        self.inotify = inotify
        self.wakeRead = wakeRead
        self.root = root
        self.delayNs = delayNs
        self.maxDelayNs = maxDelayNs
        self.quickDelayNs = quickDelayNs
        self.settleDelayNs = settleDelayNs
        self.watchLimit = watchLimit
        self.onBatch = onBatch
    }

    func closeDescriptors() {
        close(inotify)
        close(wakeRead)
    }

    var ignores: IgnorePatterns { owner?.shared.withLock { $0.ignores } ?? IgnorePatterns() }

    // MARK: The thread's loop

    func run() {
        var buffer = UnsafeMutableRawPointer.allocate(byteCount: 64 << 10, alignment: 8)
        defer {
            buffer.deallocate()
            closeDescriptors()
        }
        while true {
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            var timeout: Int32 = -1
            if hasPending {
                let now = Self.now()
                let due = dueNs
                timeout = Int32(clamping: max(0, (due - now + 999_999) / 1_000_000))
                if rootGone { timeout = 0 }
            }
            let ready = poll(&fds, 2, timeout)
            if ready < 0 && errno != EINTR { break }
            // Releases requested before the events are read apply after them.
            var junk = [UInt8](repeating: 0, count: 64)
            while read(wakeRead, &junk, junk.count) > 0 {}
            // Waiters taken before the read: what was queued before they asked is read below.
            let (stopped, releases, waiters) = owner?.shared.withLock { state -> (Bool, [String], [DispatchSemaphore]) in
                let r = state.pendingReleases
                state.pendingReleases.removeAll()
                defer { state.readWaiters.removeAll() }
                return (state.stopped, r, state.readWaiters)
            } ?? (true, [], [])
            if stopped {
                for waiter in waiters { waiter.signal() }
                return
            }
            let events = readEvents(&buffer)
            for waiter in waiters { waiter.signal() }
            if !releases.isEmpty {
                owner?.shared.withLock { state in
                    for path in releases {
                        let n = (state.ownWrites[PathKey(path)] ?? 1) - 1
                        state.ownWrites[PathKey(path)] = n > 0 ? n : nil
                    }
                }
            }
            if hasPending {
                let now = Self.now()
                if rootGone || now >= dueNs { flush() }
            }
            if events > 0 && events < Self.burstPauseLimit && !rootGone {
                // Events came: let more gather before the next read (a stop or a release still
                // ends the pause). Woken for each event, this thread preempted the one making
                // the changes: 12,000 wake-ups while a pull placed 10,000 files (B), each a
                // switch on a core the pull needed. A burst of `burstPauseLimit` events is read
                // again at once: the kernel queues 16,384, and past that only a rescan catches up.
                var wake = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
                _ = poll(&wake, 1, Self.burstPauseMs)
            }
        }
    }

    /// How long the thread waits after reading events before it reads again (well below the
    /// delay before changes are reported; the kernel queues 16,384 events by default).
    static let burstPauseMs: Int32 = 10
    /// Events read at once past which the thread reads again without a pause.
    static let burstPauseLimit = 4_096

}
