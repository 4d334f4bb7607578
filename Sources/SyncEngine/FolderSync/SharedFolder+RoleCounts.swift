internal import FoundationEssentials
internal import PeerIndex
internal import Synchronization

/// What `status` (and the dashboard, which shows it) counts of the roles' differences in a
/// folder: paths whose peer change is not applied here (send-only, no-deletes) and paths
/// changed here that receive-only peers are not sent. The count walks the folder's index
/// (`roleDifferences`, a page at a time) only where some peer has a role other than `both`,
/// at most once per `roleCountAge` (the dashboard polls `status`), and stops at
/// `roleCountLimit` paths.
extension SharedFolder {
    struct RoleCounts: Sendable, Equatable {
        var notApplied = 0
        var locallyChanged = 0
    }

    struct RoleCountCache: Sendable {
        var at: ContinuousClock.Instant
        var counts: RoleCounts
    }

    static let roleCountAge: Duration = .seconds(2)
    static let roleCountLimit = 100_000

    /// The counts, at most `roleCountAge` old (any thread: index reads only; one that fails
    /// throws, never zero counts).
    func roleCounts(localDevice: String) throws(IndexError) -> RoleCounts {
        let now = ContinuousClock.now
        if let cached = roleCountCache.withLock({ $0 }), now - cached.at < Self.roleCountAge { return cached.counts }
        let counts = try countRoleDifferences(localDevice: localDevice)
        roleCountCache.withLock { $0 = RoleCountCache(at: now, counts: counts) }
        return counts
    }

    /// Distinct paths of each kind (a path not applied from two peers counts once).
    func countRoleDifferences(localDevice: String, limit: Int = roleCountLimit) throws(IndexError) -> RoleCounts {
        var counts = RoleCounts()
        var after: String?
        var last: (notApplied: String?, locallyChanged: String?) = (nil, nil)
        while counts.notApplied < limit, counts.locallyChanged < limit {
            let page = try roleDifferences(after: after, limit: 500, localDevice: localDevice)
            // Items come in path order, a path's items together.
            for item in page.items {
                switch item.kind {
                case .notApplied where last.notApplied != item.path:
                    last.notApplied = item.path
                    counts.notApplied += 1
                case .locallyChanged where last.locallyChanged != item.path:
                    last.locallyChanged = item.path
                    counts.locallyChanged += 1
                default:
                    break
                }
            }
            guard page.more, let next = page.items.last?.path else { break }
            after = next
        }
        return counts
    }
}
