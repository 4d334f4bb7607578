#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import PeerFiles
internal import Synchronization

/// The edge of `PullRetry` for one folder: the clock, the timer, free space, the reports, and
/// what `syncpeer status` shows of the failing paths. Everything here runs on the folder's
/// `io`, except `FailingPaths` (read by the control thread).
extension SharedFolder {
    /// Seconds on a clock that never goes back (what the retry table counts in).
    static func monotonicNow() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }

    /// Path → the wanted version a kept temp file holds, for the next attempt.
    var keptTemps: [PathKey: String] {
        state.withLock { $0.retry.entries.mapValues(\.version) }
    }

    /// Paths of the table that this planning pass looked at (`paths`, or all when nil) and
    /// that need nothing now: forgotten, with their kept temp files.
    func settleFailures(considered paths: Set<PathKey>?, planned actions: [SyncAction]) {
        dispatchPrecondition(condition: .onQueue(io))
        let planned = actions.flatMap(\.paths).pathKeys
        let (settled, table) = state.withLock { state -> (Set<PathKey>, PullRetry?) in
            guard !state.retry.isEmpty else { return ([], nil) }
            // (The table is read in place: a copy alive while it changes would be copied whole.)
            var settled = Set(state.retry.entries.keys)
            if let paths { settled.formIntersection(paths) }
            settled.subtract(planned)
            for path in settled { state.retry.succeeded(path) }
            return (settled, settled.isEmpty ? nil : state.retry)
        }
        guard let table else { return }
        for path in settled { FolderApplier.removeKeptTemp(path.string, root: root) }
        failing.set(table)
        setStatus(.idle)
    }

    /// After an apply: failed paths go in the table (news reported once per change), the
    /// others leave it; then the next attempt is timed.
    func recordOutcome(_ failures: [PathKey: FailedPull], actions: [SyncAction]) {
        dispatchPrecondition(condition: .onQueue(io))
        let now = Self.monotonicNow()
        let paths = actions.flatMap(\.paths).pathKeys.sorted()
        // Looked at once, when a path failed for want of space.
        let free: UInt64? = paths.contains { failures[$0]?.failure.failure == .diskFull } ? freeBytes() : nil
        let (succeeded, news, table) = state.withLock { state in
            var succeeded: [PathKey] = []
            var news: [(path: PathKey, failure: PullFailure, plan: String)] = []
            for path in paths {
                guard let failed = failures[path] else {
                    if state.retry.succeeded(path) { succeeded.append(path) }
                    continue
                }
                if state.retry.failed(path, failed.failure.failure, reason: failed.failure.reason, version: failed.version,
                                      now: now, freeBytes: free) {
                    news.append((path, failed.failure, ""))
                }
            }
            for n in news.indices.prefix(Self.reportedPerPass) {
                news[n].plan = state.retry.entries[news[n].path].map { state.retry.plan(for: $0, now: now) } ?? ""
            }
            return (succeeded, news, state.retry)
        }
        for path in succeeded { FolderApplier.removeKeptTemp(path.string, root: root) }
        for (path, failure, plan) in news.prefix(Self.reportedPerPass) {
            report("cannot pull \(path): \(failure.reason); \(plan)")
            host?.emitFile(self, path.string, .failed, bytes: nil, total: nil, copy: nil, reason: "\(failure.reason); \(plan)")
        }
        if news.count > Self.reportedPerPass {
            report("and \(news.count - Self.reportedPerPass) more paths cannot be pulled now; see 'syncpeer status'")
        }
        failing.set(table)
        scheduleRetry()
    }

    /// Failures reported one by one per pass; the rest are counted in one line.
    static let reportedPerPass = 5

    /// A peer connected: the paths waiting for one are tried now.
    func peerConnected() {
        io.async { [self] in
            state.withLock { $0.retry.peerConnected(now: Self.monotonicNow()) }
            retryDue()
        }
    }

    /// The timer (or an event) fired: looks at free space if a path waits for it, pulls
    /// the due paths, and times the next attempt.
    func retryDue() {
        dispatchPrecondition(condition: .onQueue(io))
        let now = Self.monotonicNow()
        if state.withLock({ $0.retry.probeDue(now: now) }) {
            let free = freeBytes()
            state.withLock { $0.retry.spaceChecked(freeBytes: free, now: now) }
        }
        let due = state.withLock { $0.retry.takeDue(now: now) }
        if !due.isEmpty { pull(paths: due) }
        scheduleRetry()
    }

    /// One timer for the earliest deadline of the table: a timer scheduled before it (its
    /// generation passed) does nothing when it fires.
    func scheduleRetry() {
        dispatchPrecondition(condition: .onQueue(io))
        let (generation, deadline) = state.withLock { state in
            state.retryTimer &+= 1
            return (state.retryTimer, state.retry.nextDeadline)
        }
        guard let deadline else { return }
        io.asyncAfter(deadline: .now() + max(0, deadline - Self.monotonicNow())) { [weak self] in
            guard let self, state.withLock({ $0.retryTimer == generation }) else { return }
            retryDue()
        }
    }

    /// Free bytes for us on the folder's file system (0 when unknown).
    private func freeBytes() -> UInt64 {
        var info = statvfs()
        guard statvfs(root, &info) == 0 else { return 0 }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }
}

/// A path that failed in one apply: why, and the version it wanted.
struct FailedPull: Sendable {
    let failure: PullFailure
    let version: String
}

/// The failing paths of a folder as `syncpeer status` shows them: written on the folder's
/// `io`, read by the control thread.
final class FailingPaths: Sendable {
    private let table = Mutex(PullRetry())

    func set(_ retry: PullRetry) {
        table.withLock { $0 = retry }
    }

    var count: Int { table.withLock { $0.entries.count } }

    /// The folder's state while paths fail: "retrying" when any will be tried again by
    /// itself, "error" when all wait for a change (nil when nothing fails).
    var state: FolderState? {
        table.withLock { retry in
            if retry.isEmpty { return nil }
            return retry.entries.values.contains { $0.failure != .unwritable } ? .retrying : .error
        }
    }

    /// The first `limit` failing paths (by path): path, kind, reason, and when it is tried again.
    func list(limit: Int) -> [(path: String, failure: PullRetry.Failure, reason: String, retry: String)] {
        let now = SharedFolder.monotonicNow()
        return table.withLock { retry in
            retry.entries.sorted { $0.key < $1.key }.prefix(limit).map { path, entry in
                (path.string, entry.failure, entry.reason, retry.plan(for: entry, now: now))
            }
        }
    }
}
