internal import Dispatch
internal import Glibc
internal import Synchronization

/// What changed in a watched folder, as reported by `FolderWatcher`.
package enum WatchChange: Sendable, Hashable, CustomStringConvertible {
    /// Something at this relative path (or below it, for a directory) was created,
    /// modified, deleted or had its metadata changed: rescan it (`FolderScanner.scan(paths:)`).
    case changed(String)
    /// A rename inside the folder (both paths are also reported as `changed`).
    case renamed(from: String, to: String)
    /// The folder root was deleted, moved or unmounted: stop syncing it (a scan throws
    /// `ScanError.rootMissing`). Nothing more is reported.
    case rootGone
    /// The kernel's event queue overflowed: events were lost, do a full rescan.
    case overflow
    /// `inotify_add_watch` failed with ENOSPC: some directories are not watched. The
    /// message says how to raise the limit; until then rely on periodic full scans.
    case watchLimitReached(String)

    package var description: String {
        switch self {
        case .changed(let path): return "changed \(path)"
        case let .renamed(from, to): return "renamed \(from) -> \(to)"
        case .rootGone: return "root gone"
        case .overflow: return "overflow"
        case .watchLimitReached(let message): return "watch limit reached: \(message)"
        }
    }
}

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

    static func nanoseconds(_ d: Duration) -> Int64 {
        let (seconds, attoseconds) = d.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    static func readLimit(_ name: String) -> String? {
        let fd = open("/proc/sys/fs/inotify/" + name, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self).trimmingSpaces
    }

    /// The message of `.watchLimitReached`: the current limit and the exact fix.
    static func watchLimitMessage(root: String, watched: Int) -> String {
        let current = readLimit("max_user_watches")
        let suggested = max((current.flatMap { Int($0) } ?? 8_192) * 2, 524_288)
        return "the inotify watch limit (fs.inotify.max_user_watches = \(current ?? "unknown")) was reached after watching "
            + "\(watched) directories of \(root); changes elsewhere are only found by periodic full scans. "
            + "To raise the limit: sudo sysctl fs.inotify.max_user_watches=\(suggested) "
            + "(and to keep it after a reboot: echo fs.inotify.max_user_watches=\(suggested) | sudo tee /etc/sysctl.d/90-syncpeer.conf)"
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\n" || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\n" || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}

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

    // MARK: Watches

    func addRoot(_ rootFd: Int32) throws(FileError) {
        let wd = addWatch(rootFd, path: "")
        guard wd >= 0 else {
            throw FileError.system("inotify_add_watch", path: root, errno: errno)
        }
        rootWd = wd
        watchTree(rootFd, path: "", report: false)
    }

    /// Adds a watch on the open directory `fd`; -1 (errno set) on failure.
    func addWatch(_ fd: Int32, path: String) -> Int32 {
        if let limit = watchLimit, directories.count >= limit, descriptors[PathKey(path)] == nil {
            errno = ENOSPC
            return noteFailure(path)
        }
        var wd = inotify_add_watch(inotify, "/proc/self/fd/\(fd)", Self.mask)
        if wd < 0 && errno == ENOENT {   // no /proc: by name, not following a final link
            wd = inotify_add_watch(inotify, path.isEmpty ? root : root + "/" + path, Self.mask | UInt32(IN_DONT_FOLLOW))
        }
        guard wd >= 0 else { return noteFailure(path) }
        if let old = directories[wd], !utf8Equal(old, path), descriptors[PathKey(old)] == wd { descriptors[PathKey(old)] = nil }
        directories[wd] = path
        descriptors[PathKey(path)] = wd
        owner?.shared.withLock { $0.watchCount = directories.count }
        return wd
    }

    private func noteFailure(_ path: String) -> Int32 {
        let code = errno
        if code == ENOSPC && !limitReported {
            limitReported = true
            owner?.shared.withLock { $0.degraded = true }
            flags.insert(.watchLimitReached(FolderWatcher.watchLimitMessage(root: root, watched: directories.count)))
            noteEvent()
        }
        errno = code
        return -1
    }

    /// Watches every directory below the open directory `fd` (at `path`), depth first,
    /// without following links; with `report`, every entry found is reported as changed
    /// (it appeared before its directory's watch was in place).
    func watchTree(_ fd: Int32, path: String, report: Bool) {
        var stack: [(fd: Int32, path: String)] = [(dup(fd), path)]
        let ignores = self.ignores
        while let (dirFd, dirPath) = stack.popLast() {
            guard dirFd >= 0 else { continue }
            defer { close(dirFd) }
            let copy = dup(dirFd)
            guard copy >= 0, let stream = fdopendir(copy) else {
                if copy >= 0 { close(copy) }
                continue
            }
            var subdirectories: [String] = []
            while let entry = readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
                }
                if name == "." || name == ".." { continue }
                var isDirectory = entry.pointee.d_type == UInt8(DT_DIR)
                if entry.pointee.d_type == UInt8(DT_UNKNOWN) {
                    var st = stat()
                    isDirectory = fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mode & S_IFMT == S_IFDIR
                }
                let child = dirPath.isEmpty ? name : dirPath + "/" + name
                if ignores.isIgnored(child, isDirectory: isDirectory) { continue }
                if report { noteChanged(child) }
                if isDirectory { subdirectories.append(name) }
            }
            closedir(stream)
            for name in subdirectories {
                let child = dirPath.isEmpty ? name : dirPath + "/" + name
                let sub = openat(dirFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard sub >= 0 else { continue }
                if addWatch(sub, path: child) < 0 && errno == ENOSPC {
                    close(sub)
                    continue
                }
                stack.append((sub, child))
            }
        }
    }

    /// Removes the watches of `path` and below.
    func unwatch(_ path: String) {
        let below = path + "/"
        for (wd, dir) in directories where utf8Equal(dir, path) || utf8HasPrefix(dir, below) {
            inotify_rm_watch(inotify, wd)
            directories[wd] = nil
            descriptors[PathKey(dir)] = nil
        }
        owner?.shared.withLock { $0.watchCount = directories.count }
    }

    /// A watched directory moved inside the tree: its watches keep working, under new paths.
    func rewatch(from old: String, to new: String) {
        let below = old + "/"
        for (wd, dir) in directories where utf8Equal(dir, old) || utf8HasPrefix(dir, below) {
            let moved = new + String(decoding: dir.utf8.dropFirst(old.utf8.count), as: UTF8.self)
            directories[wd] = moved
            if descriptors[PathKey(dir)] == wd { descriptors[PathKey(dir)] = nil }
            descriptors[PathKey(moved)] = wd
        }
    }

    /// Watches the new directory at `path` (and below).
    func watchNewDirectory(_ path: String, report: Bool) {
        guard let (parent, name) = openParent(path) else { return }
        defer { close(parent) }
        let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        if addWatch(fd, path: path) >= 0 { watchTree(fd, path: path, report: report) }
    }

    /// True when `path` is a directory now (not following a final link).
    func isDirectory(_ path: String) -> Bool {
        guard let (parent, name) = openParent(path) else { return false }
        defer { close(parent) }
        var st = stat()
        return fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }

    /// The parent directory of `path`, opened from the root one component at a time.
    func openParent(_ path: String) -> (Int32, String)? {
        var parts = path.split(separator: "/").map(String.init)
        guard let name = parts.popLast() else { return nil }
        var fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        for part in parts where fd >= 0 {
            let sub = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            close(fd)
            fd = sub
        }
        return fd >= 0 ? (fd, name) : nil
    }

    // MARK: Loop

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

    /// When the batch being aggregated is due.
    var dueNs: Int64 {
        let wait = !quickBatch ? delayNs : isSettled ? settleDelayNs : quickDelayNs
        return min(lastEventNs + wait, firstEventNs + maxDelayNs)
    }

    /// Nothing of the batch is still being written: every file written in it was closed,
    /// every name removed from it is there again, and no rename waits for its second half.
    var isSettled: Bool { unsettled.isEmpty && moves.isEmpty }

    var hasPending: Bool { !changed.isEmpty || !renames.isEmpty || !flags.isEmpty || !moves.isEmpty }

    static func now() -> Int64 { WatchBatch.now() }

    func noteEvent() {
        let now = Self.now()
        if !hasPending {
            firstEventNs = now
            quickBatch = now - lastActivityNs >= delayNs
        }
        lastEventNs = now
        lastActivityNs = now
    }

    /// Reads and handles every queued event; how many there were.
    @discardableResult
    func readEvents(_ buffer: inout UnsafeMutableRawPointer) -> Int {
        let headerSize = 16
        var count = 0
        // The patterns once per read, not once per event (each read of them takes the lock
        // shared with the node's threads and copies them).
        let ignores = self.ignores
        while true {
            let n = read(inotify, buffer, 64 << 10)
            if n <= 0 { return count }   // EAGAIN: drained
            var offset = 0
            while offset + headerSize <= n {
                let wd = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let cookie = buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
                let length = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                let nameStart = buffer.advanced(by: offset + headerSize).assumingMemoryBound(to: UInt8.self)
                let nameLength = strnlen(UnsafeRawPointer(nameStart).assumingMemoryBound(to: CChar.self), length)
                let nameBytes = UnsafeBufferPointer(start: nameStart, count: nameLength)
                offset += headerSize + length
                count += 1
                handle(wd: wd, mask: mask, cookie: cookie, name: nameBytes, ignores: ignores)
            }
        }
    }

    func handle(wd: Int32, mask: UInt32, cookie: UInt32, name nameBytes: UnsafeBufferPointer<UInt8>, ignores: IgnorePatterns) {
        if finished { return }
        func has(_ flag: Int32) -> Bool { mask & UInt32(bitPattern: flag) != 0 }
        if has(IN_Q_OVERFLOW) {
            flags.insert(.overflow)
            noteEvent()
            // Directories created during the overflow may be unwatched: walk the tree again.
            if let fd = Optional(open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)), fd >= 0 {
                watchTree(fd, path: "", report: false)
                close(fd)
            }
            return
        }
        guard let directory = directories[wd] else { return }
        if has(IN_IGNORED) {
            directories[wd] = nil
            if descriptors[PathKey(directory)] == wd { descriptors[PathKey(directory)] = nil }
            owner?.shared.withLock { $0.watchCount = directories.count }
            if wd == rootWd { markRootGone() }
            return
        }
        if wd == rootWd && (has(IN_DELETE_SELF) || has(IN_MOVE_SELF) || has(IN_UNMOUNT)) {
            markRootGone()
            return
        }
        if has(IN_DELETE_SELF) || has(IN_MOVE_SELF) || has(IN_UNMOUNT) { return }   // the parent reports it
        guard nameBytes.count > 0 else {
            if !directory.isEmpty && has(IN_ATTRIB) { noteChanged(directory) }
            return
        }
        // A pull's temporaries are ignored whatever the rules, and each makes five events before
        // its rename (create, write, mode, time, close): only its renames matter here.
        let temporary = IgnorePatterns.temporaryBytes
        let isTemporary = nameBytes.count >= temporary.count && nameBytes.suffix(temporary.count).elementsEqual(temporary)
        if isTemporary && !has(IN_MOVED_FROM) && !has(IN_MOVED_TO) { return }
        if isTemporary && has(IN_MOVED_FROM) && !has(IN_ISDIR) {
            // A pull's temporary file renamed into place: only its cookie matters (ignored
            // whatever the rules, it is no rename to report), not its path (B: 10,000 a pull).
            moves[cookie] = ("", false, false)
            noteEvent()
            return
        }
        guard SafePath.firstInvalidUTF8(Array(nameBytes)) == nil else { return }   // the scanner reports those
        let name = String(decoding: nameBytes, as: UTF8.self)
        let path = directory.isEmpty ? name : directory + "/" + name
        let isDirectory = has(IN_ISDIR)
        let ignored = ignores.isIgnored(path, isDirectory: isDirectory)
        // The ignore file is never synced, but any change to it (written, replaced by a
        // rename, deleted) is reported so that its owner reloads the patterns.
        if path == IgnorePatterns.fileName && !isDirectory { noteChanged(path) }

        if has(IN_CLOSE_WRITE) || has(IN_MOVED_TO) { unsettled.remove(PathKey(path)) }   // complete there now
        if has(IN_MOVED_FROM) {
            moves[cookie] = (path, isDirectory, !ignored)
            if ignored { noteEvent() } else if noteChanged(path) { unsettled.insert(PathKey(path)) }
            return
        }
        if has(IN_MOVED_TO) {
            if let from = moves.removeValue(forKey: cookie) {
                if isDirectory {
                    if ignored {
                        unwatch(from.path)
                    } else {
                        if from.reportable { rewatch(from: from.path, to: path) }
                        // The paths were remapped as of this event, but the tree may have
                        // moved on since (the directory was made under a name it no longer
                        // has, a new one took the old name, its parent moved): watch what is
                        // there now, by inode, and report what it holds.
                        watchNewDirectory(path, report: true)
                    }
                }
                if !ignored {
                    noteChanged(path)
                    if from.reportable && !isOwnWrite(from.path) && !isOwnWrite(path) { renames.append((from.path, path)) }
                }
            } else if !ignored {
                noteChanged(path)   // moved in from outside the folder
                if isDirectory { watchNewDirectory(path, report: true) }
            }
            return
        }
        if ignored { return }
        if has(IN_CREATE) && isDirectory { watchNewDirectory(path, report: true) }
        if noteChanged(path), has(IN_MODIFY) || has(IN_DELETE) || (has(IN_CREATE) && !isDirectory) {
            unsettled.insert(PathKey(path))
        }
    }

    func markRootGone() {
        guard !rootGone else { return }
        rootGone = true
        flags.insert(.rootGone)
        noteEvent()
    }

    /// Notes an event at `path`; whether the path joined the batch (not the node's own write).
    @discardableResult
    func noteChanged(_ path: String) -> Bool {
        noteEvent()
        if isOwnWrite(path) { return false }
        changed.insert(PathKey(path))
        return true
    }

    func isOwnWrite(_ path: String) -> Bool {
        owner?.shared.withLock { state in
            if state.ownWrites.isEmpty { return false }
            var candidate = Substring(path)
            while true {
                if state.ownWrites[PathKey(String(candidate))] != nil { return true }
                guard let slash = candidate.lastIndex(of: "/") else { return false }
                candidate = candidate[..<slash]
            }
        } ?? false
    }

    func flush() {
        // A directory moved out of the folder, or into one not watched yet (no MOVED_TO):
        // its watches would report under stale paths. A directory that has the name now
        // (made since) is watched again, and what it holds reported.
        for (_, move) in moves where move.isDirectory {
            unwatch(move.path)
            if move.reportable && isDirectory(move.path) { watchNewDirectory(move.path, report: true) }
        }
        moves.removeAll()
        let newestEventNs = lastEventNs
        var batch = changed.sorted().map { WatchChange.changed($0.string) }
        batch += renames.map { WatchChange.renamed(from: $0.0, to: $0.1) }
        for flag in flags {
            if case .watchLimitReached = flag { batch.append(flag) }
        }
        if flags.contains(.overflow) { batch.append(.overflow) }
        if flags.contains(.rootGone) { batch.append(.rootGone) }
        changed.removeAll()
        unsettled.removeAll()
        renames.removeAll()
        flags.removeAll()
        if rootGone {
            finished = true
            for (wd, _) in directories { inotify_rm_watch(inotify, wd) }
            directories.removeAll()
            descriptors.removeAll()
            owner?.shared.withLock { $0.watchCount = 0 }
        }
        if !batch.isEmpty { onBatch(WatchBatch(changes: batch, newestEventNs: newestEventNs)) }
    }
}
