#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import PeerFiles

/// When the paths whose pull failed are tried again: a pure state machine (no clock, no
/// disk, no network), fed with failures, successes and events; the folder supplies the time
/// (seconds on a monotonic clock) and runs the timers.
///
///     failure kind     retried by the clock          retried at once when
///     ───────────────  ────────────────────────────  ─────────────────────────────────
///     peerUnavailable  1 s, 2 s, 4 s … up to 60 s    a peer connects
///     badData          1 s, 2 s, 4 s … up to 60 s    a peer connects
///     diskFull         after 10 min (a safety net)   a probe sees more free space
///     unwritable       never (a rescan tries it)     its wanted version changes (a new plan)
///     notEmpty         1 s, 2 s, 4 s … up to 60 s    a peer connects
///
/// A full disk is not retried sooner by the clock: each attempt would fetch what cannot be
/// stored. The 10-minute net is for a quota or a file system whose free space statvfs does
/// not show.
///
/// A path's failure is reported once per change: again only when its wanted version, its
/// kind or its reason differ from the last one reported.
struct PullRetry: Equatable {
    /// Why a path could not be pulled.
    enum Failure: String, Sendable, Equatable, CaseIterable {
        /// No connected peer holds the content, the link was cut, or requests went unanswered.
        case peerUnavailable
        /// A peer answered with bytes that do not match the chunk's hash.
        case badData
        /// The disk (or the quota) is full.
        case diskFull
        /// A name or place that cannot be written (too long, read-only, no permission).
        case unwritable
        /// A directory a peer deleted still holds entries that its deletion covers but that
        /// are not deleted here yet (their tombstones are on their way).
        case notEmpty
    }

    /// What, besides the clock, makes a failed path worth trying again.
    enum Wake: Sendable, Equatable {
        case peerConnected
        case spaceFreed
        case versionChanged
    }

    /// One failing path.
    struct Entry: Sendable, Equatable {
        var failure: Failure
        var reason: String
        /// The wanted content (its root hash, as hex): a temp file kept from an attempt holds
        /// chunks of this version only.
        var version: String
        /// Failed attempts at this version.
        var attempts: Int
        /// When the clock tries it again (nil: only an event does, or an attempt is running).
        var retryAt: Double?
        /// For `diskFull`: the free bytes seen when it failed.
        var freeBytes: UInt64?
    }

    static let firstDelay = 1.0
    static let maxDelay = 60.0
    /// When a path that failed on a full disk is tried again if no probe saw space freed.
    static let fullDiskDelay = 600.0
    /// How often free space is looked at while a path waits for it (a statvfs call).
    static let spaceProbeInterval = 2.0

    private(set) var entries: [PathKey: Entry] = [:]
    /// When free space is looked at next (nil: no path waits for space).
    private(set) var nextProbe: Double?

    var isEmpty: Bool { entries.isEmpty }

    /// The wait before the attempt that follows `attempts` failed ones: 1 s, doubling, capped.
    static func delay(afterAttempts attempts: Int) -> Double {
        let doublings = max(0, min(attempts - 1, 30))
        return min(maxDelay, firstDelay * Double(1 << doublings))
    }

    /// The table above: whether the clock retries a failure, and what event wakes it.
    static func rule(_ failure: Failure) -> (timed: Bool, wake: Wake) {
        switch failure {
        case .peerUnavailable, .badData, .notEmpty: (true, .peerConnected)
        case .diskFull: (true, .spaceFreed)
        case .unwritable: (false, .versionChanged)
        }
    }

    /// A pull of `path` (wanting `version`) failed; true when this failure is news to report.
    @discardableResult
    mutating func failed(_ path: PathKey, _ failure: Failure, reason: String, version: String, now: Double,
                         freeBytes: UInt64? = nil) -> Bool {
        let old = entries[path]
        let attempts = old?.version == version ? (old?.attempts ?? 0) + 1 : 1
        let timed = Self.rule(failure).timed
        let delay = failure == .diskFull ? Self.fullDiskDelay : Self.delay(afterAttempts: attempts)
        entries[path] = Entry(failure: failure, reason: reason, version: version, attempts: attempts,
                              retryAt: timed ? now + delay : nil,
                              freeBytes: failure == .diskFull ? freeBytes ?? 0 : nil)
        if failure == .diskFull, nextProbe == nil { nextProbe = now + Self.spaceProbeInterval }
        if old?.failure == .diskFull { updateProbe() }   // (it reads every entry: only when it can change)
        return old == nil || old?.failure != failure || old?.reason != reason || old?.version != version
    }

    /// `path` needs nothing more (pulled, or nothing to do any more); true when it was failing.
    @discardableResult
    mutating func succeeded(_ path: PathKey) -> Bool {
        // Every pulled path comes here: reading the whole table for each was quadratic
        // (D: 2 % of the receiver's CPU with a few thousand paths in it).
        guard let removed = entries.removeValue(forKey: path) else { return false }
        if removed.failure == .diskFull { updateProbe() }
        return true
    }

    /// A peer connected: every path that waits for one is due now.
    mutating func peerConnected(now: Double) {
        wake(.peerConnected, now: now)
    }

    /// Free space was looked at: paths that failed on a full disk are due if there is more
    /// now than when they failed.
    mutating func spaceChecked(freeBytes: UInt64, now: Double) {
        for (path, entry) in entries where waitsForSpace(path) && freeBytes > (entry.freeBytes ?? 0) {
            entries[path]?.retryAt = now
        }
        nextProbe = nil
        updateProbe(now: now)
    }

    /// True when free space should be looked at now.
    func probeDue(now: Double) -> Bool {
        nextProbe.map { $0 <= now } ?? false
    }

    /// The paths due for an attempt now; they are taken (no longer timed) until they fail again.
    mutating func takeDue(now: Double) -> Set<PathKey> {
        var due = Set<PathKey>()
        for (path, entry) in entries {
            guard let at = entry.retryAt, at <= now else { continue }
            due.insert(path)
            entries[path]?.retryAt = nil
        }
        return due
    }

    /// True when `path` waits for free space: a rescan does not try it (it would fetch
    /// what cannot be stored), the free-space probe does.
    func waitsForSpace(_ path: PathKey) -> Bool {
        guard let entry = entries[path] else { return false }
        return entry.failure == .diskFull && entry.retryAt != nil   // nil: an attempt is running
    }

    /// When something is due next (an attempt or a free-space probe), if anything is.
    var nextDeadline: Double? {
        let times = entries.values.compactMap(\.retryAt) + (nextProbe.map { [$0] } ?? [])
        return times.min()
    }

    /// How a failing path will be tried again, in words (for `syncpeer status`).
    func plan(for entry: Entry, now: Double) -> String {
        switch Self.rule(entry.failure).wake {
        case .peerConnected:
            let wait = entry.retryAt.map { max(0, Int(($0 - now).rounded(.up))) }
            return wait.map { "retried in \($0) s or when a peer connects" } ?? "being retried"
        case .spaceFreed:
            return entry.retryAt == nil ? "being retried" : "retried when space is freed"
        case .versionChanged:
            return "retried when it changes or at the next rescan"
        }
    }

    private mutating func wake(_ event: Wake, now: Double) {
        for (path, entry) in entries where Self.rule(entry.failure).wake == event {
            entries[path]?.retryAt = now
        }
    }

    /// Keeps a probe planned exactly while some path waits for space.
    private mutating func updateProbe(now: Double? = nil) {
        let waiting = entries.keys.contains(where: waitsForSpace)
        if !waiting {
            nextProbe = nil
        } else if nextProbe == nil, let now {
            nextProbe = now + Self.spaceProbeInterval
        }
    }
}

/// Why one path's pull failed: its kind (which decides the retry) and the words for the user.
struct PullFailure: Sendable, Equatable {
    let failure: PullRetry.Failure
    let reason: String

    init(_ failure: PullRetry.Failure, _ reason: String) {
        self.failure = failure
        self.reason = reason
    }

    /// A write that failed with errno `code`: a full disk (or quota), or a place that
    /// cannot be written.
    static func writing(_ code: Int32, _ what: String) -> PullFailure {
        let kind: PullRetry.Failure = code == ENOSPC || code == EDQUOT ? .diskFull : .unwritable
        return PullFailure(kind, "\(what): \(String(cString: strerror(code)))")
    }

    /// The wanted version of a path as the retry table keeps it: its content (kind, link
    /// target, root hash), so a kept temp file is reused for the same content only.
    static func version(of state: FileEntry) -> String {
        let hash = (state.rootHash ?? []).map { String($0, radix: 16) }.joined(separator: ".")
        return "\(state.kind.rawValue):\(state.deleted ? "deleted" : hash):\(state.symlinkTarget ?? "")"
    }
}
