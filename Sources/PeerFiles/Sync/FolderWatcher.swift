internal import Dispatch
internal import Glibc
internal import Synchronization

/// Watches a whole folder tree with inotify and reports changed paths in batches.
///
/// - Every directory is watched (not following symbolic links; ignored directories are
///   not watched); new subdirectories are watched as they appear, and what a new
///   directory already contains when its watch is added is reported too (nothing created
///   in the gap is missed). Removed directories' watches are dropped.
/// - Events are aggregated: a batch is delivered when nothing happened for `delay`
///   (default 1 s), or `maxDelay` (default 10 × `delay`) after its first event, so an
///   editor's save storm (temp file, writes, rename) becomes one batch. A batch whose first
///   event ends a quiet period (nothing for `delay` before it) waits only `quickDelay`
///   (default `delay` / 8) without events: a single change is reported within ~0.1 s, not
///   a whole window later, while the batches of a burst that goes on gather as before (its
///   next events are not after a quiet period). When such a batch is also settled (every
///   file written in it was closed again, every name deleted or moved away in it is there
///   again, no rename half waits for its other half), it waits only `settleDelay` (at most
///   20 ms): a file written in place and closed, or moved in, is reported at once, while a
///   file still open for writing, or an editor's save that removed a name, waits as before. Paths are deduplicated and sorted in each
///   batch.
/// - Renames are recognised by pairing MOVED_FROM and MOVED_TO cookies and reported as
///   `.renamed(from:to:)` in addition to `.changed` for both paths.
/// - Ignored paths are filtered (the built-in ones too: `.syncpeer-partial`,
///   `.syncpeer-folder`, `*.syncpeer-tmp`), and so are the node's own writes: paths between
///   `beginOwnWrite(_:)` and `endOwnWrite(_:)` (and everything below them).
/// - When the inotify watch limit is hit, `.watchLimitReached` says how to raise it and
///   the watcher goes on with the watches it has (`isDegraded` becomes true).
///
/// Events are read on a dedicated thread; `onChanges` is called on that thread, one batch
/// at a time (it may call `stop()`). `stop()` closes everything.
package final class FolderWatcher: Sendable {
    package let rootPath: String
    package let delay: Duration
    package let maxDelay: Duration
    /// How long the first batch after a quiet period waits without events.
    package let quickDelay: Duration
    /// How long such a batch waits without events once it is settled (nothing in it still
    /// open for writing): `quickDelay`, at most 20 ms.
    package var settleDelay: Duration { min(quickDelay, Self.maxSettleDelay) }
    static let maxSettleDelay = Duration.milliseconds(20)

    struct Shared {
        var ownWrites: [PathKey: Int] = [:]
        var pendingReleases: [String] = []
        var ignores: IgnorePatterns
        var stopped = false
        var degraded = false
        var watchCount = 0
        var thread: pthread_t?
        /// Callers of `readQueuedEvents`, signalled once the thread has read what was queued.
        var readWaiters: [DispatchSemaphore] = []
    }

    let shared: Mutex<Shared>
    private let wakeWrite: Int32

    /// Starts watching `root` (a symbolic link there is followed: it is the user's choice).
    /// The initial watches are in place when this returns.
    package convenience init(root: String, ignores: IgnorePatterns = IgnorePatterns(), delay: Duration = .seconds(1),
                maxDelay: Duration? = nil, quickDelay: Duration? = nil,
                onChanges: @escaping @Sendable ([WatchChange]) -> Void) throws(FileError) {
        try self.init(root: root, ignores: ignores, delay: delay, maxDelay: maxDelay, quickDelay: quickDelay, watchLimit: nil,
                      onBatch: { onChanges($0.changes) })
    }

    /// `watchLimit`: tests simulate the kernel's watch limit with it.
    convenience init(root: String, ignores: IgnorePatterns, delay: Duration, maxDelay: Duration?, quickDelay: Duration? = nil,
                     watchLimit: Int?, onChanges: @escaping @Sendable ([WatchChange]) -> Void) throws(FileError) {
        try self.init(root: root, ignores: ignores, delay: delay, maxDelay: maxDelay, quickDelay: quickDelay, watchLimit: watchLimit,
                      onBatch: { onChanges($0.changes) })
    }

    /// As `init(root:…onChanges:)`, each batch with when its newest event was read (see `WatchBatch`).
    package init(root: String, ignores: IgnorePatterns, delay: Duration, maxDelay: Duration?, quickDelay: Duration?,
                 watchLimit: Int?, onBatch: @escaping @Sendable (WatchBatch) -> Void) throws(FileError) {
        rootPath = root
        self.delay = delay
        self.maxDelay = maxDelay ?? delay * 10
        self.quickDelay = min(quickDelay ?? delay / 8, delay)
        shared = Mutex(Shared(ignores: ignores))
        let rootFd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard rootFd >= 0 else { throw FileError.system("open directory", path: root, errno: errno) }
        defer { close(rootFd) }
        let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard inotify >= 0 else {
            let code = errno
            var error = FileError.system("inotify_init1", path: root, errno: code)
            if code == EMFILE {
                error.message = "too many inotify instances (fs.inotify.max_user_instances is \(Self.readLimit("max_user_instances") ?? "?")); raise it with: sudo sysctl fs.inotify.max_user_instances=1024"
            }
            throw error
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            let code = errno
            close(inotify)
            throw FileError.system("pipe", path: root, errno: code)
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeWrite = fds[1]
        let loop = WatchLoop(inotify: inotify, wakeRead: fds[0], root: root, delayNs: Self.nanoseconds(delay),
                             maxDelayNs: Self.nanoseconds(self.maxDelay), quickDelayNs: Self.nanoseconds(self.quickDelay),
                             settleDelayNs: Self.nanoseconds(settleDelay),
                             watchLimit: watchLimit, onBatch: onBatch)
        loop.owner = self
        do throws(FileError) {
            try loop.addRoot(rootFd)
        } catch {
            loop.closeDescriptors()
            close(fds[1])
            throw error
        }
        let thread: pthread_t
        do throws(FileError) {
            thread = try Self.startThread(running: loop)
        } catch {
            close(fds[1])
            throw error
        }
        shared.withLock { $0.thread = thread }
    }

    /// Starts the thread that runs `loop`, which from then on is that thread's alone
    /// (`sending`: the caller cannot touch it again). On failure the loop's descriptors are closed.
    private static func startThread(running loop: sending WatchLoop) throws(FileError) -> pthread_t {
        let context = Unmanaged.passRetained(loop).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { raw in
            let loop = Unmanaged<WatchLoop>.fromOpaque(raw!).takeRetainedValue()
            loop.run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<WatchLoop>.fromOpaque(context).release()
            loop.closeDescriptors()
            throw FileError.system("pthread_create", path: loop.root, errno: result)
        }
        return thread
    }

    deinit { stop() }

    /// Paths (relative, and everything below them) the node itself is writing: their
    /// events are not reported until `endOwnWrite`. Calls nest per path.
    package func beginOwnWrite(_ path: String) {
        shared.withLock { $0.ownWrites[PathKey(path), default: 0] += 1 }
    }

    /// Ends `beginOwnWrite(path)`. The events the node's writes caused before this call
    /// are still filtered (they are read before the mark is removed).
    package func endOwnWrite(_ path: String) {
        shared.withLock { $0.pendingReleases.append(path) }
        wake()
    }

    /// Replaces the ignore patterns (after `.syncpeerignore` changed). Directories that
    /// stop being ignored are watched from the next full rescan on (`rewatch()`).
    package func updateIgnores(_ ignores: IgnorePatterns) {
        shared.withLock { $0.ignores = ignores }
    }

    /// True once the watch limit was hit: some directories are not watched.
    package var isDegraded: Bool { shared.withLock { $0.degraded } }

    /// Directories currently watched.
    package var watchedDirectories: Int { shared.withLock { $0.watchCount } }

    /// Stops the thread and closes the inotify descriptor. Idempotent; may be called from
    /// `onChanges` (then the thread ends after the callback returns).
    package func stop() {
        let thread: pthread_t? = shared.withLock { state in
            if state.stopped { return nil }
            state.stopped = true
            defer { state.thread = nil }
            return state.thread
        }
        guard let thread else { return }
        wake()
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
        close(wakeWrite)
    }

    /// Returns once the watcher has read every event queued before this call (a new
    /// directory's listing included), so each has its time in a batch (`WatchBatch`): a scan
    /// that starts after this call stands for them. Without it, a scan started right after a
    /// tree was moved in (D: `syncpeer rescan` of 5,000 new directories) starts before the
    /// watcher has listed them, and their batch is scanned again. Waits at most `timeout`
    /// (false then, or when stopped).
    @discardableResult
    package func readQueuedEvents(timeout: Duration = .seconds(2)) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let stopped = shared.withLock { state in
            if !state.stopped { state.readWaiters.append(done) }
            return state.stopped
        }
        if stopped { return false }
        wake()
        return done.wait(timeout: .now() + .nanoseconds(Int(Self.nanoseconds(timeout)))) == .success
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }
}
