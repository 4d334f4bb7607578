internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// A shared folder's mutable state, behind `SharedFolder.state` (one `Mutex`): the compiler
/// checks that nothing reaches it without the lock. Nearly all of it is the folder's `io`
/// queue's (the order of scans, pulls and retries); `status` and `error` are set on the
/// node's queue and read by `syncpeer status` from the control thread. The lock is held only
/// to read or write these values: never across a scan, a pull, I/O or a call out.
extension SharedFolder {
    struct State {
        /// io: the watcher and the ignore patterns in force.
        var watcher: FolderWatcher?
        var ignores = IgnorePatterns()
        /// Set by `start` (before `io` runs anything), read on io.
        var rescanSeconds = 3600.0
        var watchDelay: Duration = .seconds(1)
        /// Whether the periodic tick runs (`start` until `stop`).
        var ticking = false
        /// io: when the last full scan ran (the timer ticks more often to watch the root).
        var lastFullScan = DispatchTime.now()
        /// io: why the folder does not sync (its root is not the adopted one, or a scan's
        /// deletions were refused); nil while it syncs. Nothing is pulled while it is set.
        var stopped: StopReason?
        /// io: the error last shown for a stop (the same one is not emitted again).
        var shownStop: String?
        /// io: the root's device and inode as adopted (loaded from the index; nil until adopted).
        var rootIdentity: RootIdentity?
        var rootIdentityLoaded = false
        /// io: the user confirmed (`syncpeer confirm`): the next scan's deletions are recorded
        /// even if they empty the folder.
        var deletionsConfirmed = false
        /// io (set before `start`): the machine went down under the last daemon; the first full
        /// scan takes what the index has and the disk lacks as lost, not deleted (`forgetVanished`).
        var recoversVanished = false
        /// Files the applier just placed, as it recorded them (io only; see `PlacedFiles`).
        var placed = PlacedFiles()
        /// io: paths whose pull failed and when they are tried again (SharedFolder+Retry), and
        /// the retry timer's generation: a timer runs only while it is the last one scheduled.
        var retry = PullRetry()
        var retryTimer: UInt64 = 0
        /// io: our role towards each member, read at the start of every pull (SharedFolder+Roles).
        var policies: [String: PeerPolicy] = [:]
        /// io: the mass-change guard's burst, and whether the user confirmed the held change
        /// (set by `confirm`, for one pull; SharedFolder+MassChange).
        var massGuard = MassChangeGuard()
        var massConfirmed = false
        /// Node queue (set), any thread (read): what `syncpeer status` shows.
        var status = FolderState.scanning
        var error: String?
        /// io: the error a step that could not read the index showed, and whether a pull
        /// is due to try again (SharedFolder+IndexFailure).
        var indexFailure: String?
        var indexRetryDue = false
        /// io: the scans that completed lately, for batches they stand for (ScanCoverage).
        var coverage = ScanCoverage()
    }

    // Scalars and small values, read or written through the lock one at a time. (The
    // collections, `placed`, `retry`, `policies` and `massGuard`, are reached with `withLock`
    // where they are used: a get-then-set would copy them whole.)

    var watcher: FolderWatcher? { state.withLock { $0.watcher } }
    var ignores: IgnorePatterns { state.withLock { $0.ignores } }
    var rescanSeconds: Double { state.withLock { $0.rescanSeconds } }
    var watchDelay: Duration { state.withLock { $0.watchDelay } }
    var lastFullScan: DispatchTime { state.withLock { $0.lastFullScan } }
    var stopped: StopReason? { state.withLock { $0.stopped } }
    var rootIdentity: RootIdentity? { state.withLock { $0.rootIdentity } }
    var deletionsConfirmed: Bool { state.withLock { $0.deletionsConfirmed } }
    var massConfirmed: Bool { state.withLock { $0.massConfirmed } }
    var status: FolderState { state.withLock { $0.status } }
    var error: String? { state.withLock { $0.error } }
    /// Both, as one `setError`/`setStatus` left them (any thread).
    var shown: (status: FolderState, error: String?) { state.withLock { ($0.status, $0.error) } }
    /// Set before `start` (FolderService).
    var recoversVanished: Bool {
        get { state.withLock { $0.recoversVanished } }
        set { state.withLock { $0.recoversVanished = newValue } }
    }

    /// Marks what the applier just recorded as placed (see `PlacedFiles`). On `io`.
    func notePlaced(_ records: [FileRecord]) {
        dispatchPrecondition(condition: .onQueue(io))
        state.withLock { $0.placed.note(records) }
    }

    /// Takes the watcher out (stopped by the caller, outside the lock). On `io`.
    func dropWatcher() {
        let old = state.withLock { state in
            defer { state.watcher = nil }
            return state.watcher
        }
        old?.stop()
    }
}
