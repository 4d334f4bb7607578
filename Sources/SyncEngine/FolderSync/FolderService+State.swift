internal import PeerFiles
internal import PeerWire

extension FolderService {
    /// What the service holds: its folders, what is in flight for them, and its wiring,
    /// behind `FolderService.state`. Written on `queue` (the folder table and what is in
    /// flight: every such change runs there, in order); read through the lock from any
    /// thread. Nothing is called while the lock is held.
    struct State {
        var folders: [String: SharedFolder] = [:]
        var pendingBlocks: [UInt32: PendingBlock] = [:]
        /// Whether `sweepBlocksLater` has a sweep scheduled.
        var sweeping = false
        var nextRequest: UInt32 = 1
        /// Highest local sequence sent to a peer in this run ("folder|device").
        var sent: [String: Int64] = [:]
        /// Index passes running, one page at a time ("folder|session ID").
        var sending: Set<String> = []
        /// Block requests refused per session (session ID), for one event when they pile up.
        var refusedBlocks: [UInt64: Int] = [:]
        /// Block requests waiting for a session's serve budget, in order (session ID).
        var parked: [UInt64: [(request: Frame, folder: SharedFolder)]] = [:]
        /// Folders whose index quota a session's peer exceeded (reported once per session).
        var quotaReported: [UInt64: Set<String>] = [:]
        /// Share offers refused for the peer's bound, per session (reported at the 1st, 10th, ...).
        var refusedShareOffers: [UInt64: Int] = [:]
        /// "folder|device" of peers whose stored entries and a page did not fit in the allowance
        /// once: their pages are counted exactly at once (`withinIndexQuota`).
        var pastAllowance: Set<String> = []
        /// Entries peers may still store before their quota is counted again (`withinIndexQuota`).
        var quotaHeadroom = QuotaHeadroom()
        /// How many records the next page of an index pass reads ("folder|session ID").
        var pageLimit: [String: Int] = [:]
        /// Index passes waiting to go on after a read of the index failed ("folder|session ID"), and how long they wait.
        var indexRetry = IndexRetry()
        /// Small files' content a peer sent for its next index page (session ID → one folder's).
        var indexBlocks: [UInt64: HeldBlocks] = [:]
        /// Content sent with our index pages and not yet taken by the peers' pulls.
        var blockWindow = IndexBlockWindow()
        /// Version requests sent and waiting for their answer (issue 41).
        var pendingVersions: [UInt32: (device: String, callback: @Sendable (VersionPage?) -> Void)] = [:]
        /// What members said they hold of a folder ("folder|device"; absent: everything).
        var peerSelections: [String: FolderSelection] = [:]
        /// Its receive folder changes with `receive-dir` (on `queue`).
        var config: NodeConfig
        /// Sessions (the node); weak: the node owns this service.
        weak var link: (any PeerLink)?
        /// Where the folders keep the versions they replace (set by the node before it starts).
        var versions: VersionKeeper?

        /// Whether a sweep of the pending block requests is to be scheduled now: some are
        /// pending and none is (`sweepBlocksLater`).
        mutating func startSweep() -> Bool {
            guard !sweeping, !pendingBlocks.isEmpty else { return false }
            sweeping = true
            return true
        }
    }

    /// A block request sent and waiting for its answer (`requestBlocks`).
    typealias PendingBlock = (device: String, deadline: ContinuousClock.Instant, limit: Int, callback: @Sendable ([UInt8]?) -> Void)
}

/// The content of small files that came for a peer's next index page of one folder
/// (`Frame.indexBlocks`). A session has one at most: a sender sends a page's blocks and the
/// page together, so blocks for another folder replace it.
struct HeldBlocks {
    let folder: String
    var blocks: [[UInt8]] = []
    /// What the blocks cost to hold (`SharedFolder.heldCost`).
    var cost = 0

    /// The most one may hold: a page's worth of content, 4 MiB (and its arrays' overhead
    /// for a page of `FolderService.indexBatch` blocks). A frame beyond it is dropped (its
    /// files are asked for as before): a peer sending tiny blocks gets ~65,000 of them.
    static let limit = SharedFolder.indexBlockPageBytes + SharedFolder.heldCost(0) * FolderService.indexBatch

    init(folder: String) {
        self.folder = folder
    }

    /// Adds a frame's blocks unless they would exceed `limit`.
    mutating func append(_ more: [[UInt8]]) {
        let added = SharedFolder.heldCost(of: more)
        guard cost + added <= Self.limit else { return }
        blocks += more
        cost += added
    }
}
