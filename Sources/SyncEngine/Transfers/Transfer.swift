internal import Synchronization
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// The transfers a node is running (a value held by `TransferService`, inside its lock).
struct TransferTable: Sendable {
    var outgoing: [TransferID: OutgoingTransfer] = [:]
    var incoming: [TransferID: IncomingTransfer] = [:]
    /// `syncpeer receive` clients waiting for the next offer (directory, or nil for the
    /// offer's recorded or default folder).
    var receiveWaiters: [ReceiveWaiter] = []
    /// Offers declined for a peer's bounds, per session (TransferService+Bounds).
    var refusedOffers: [UInt64: Int] = [:]
}

/// A client of the control socket following one transfer: progress events, then the end.
struct TransferObserver: Sendable {
    let progress: @Sendable (NodeEvent) -> Void
    let completion: @Sendable (Result<TransferInfo, EngineError>) -> Void
}

/// A `syncpeer receive` waiting for the next offer.
struct ReceiveWaiter: Sendable {
    let directory: String?
    let accept: Bool
    let observer: TransferObserver
}

/// The mutable fields both directions share, held inside each transfer's lock.
struct TransferShared: Sendable {
    var sessionID: UInt64?
    /// Changed only through `move(to:)`.
    private(set) var state: TransferState
    var meter = RateMeter()
    var lastEmit: ContinuousClock.Instant = .now - .seconds(1)
    var observers: [TransferObserver] = []
    /// The last index write of this transfer that failed (nil once one succeeds): shown as
    /// the reason of its events, since resume depends on the record.
    var recordFailure: String?
    /// Why it is paused (shown by `transfers` while it is): a lost link, an offline peer.
    var pauseReason: String?

    init(state: TransferState) { self.state = state }

    /// Moves to `next` when `TransferState.allows` the step; returns whether it did. A
    /// finished transfer never moves again (a late frame cannot revive it).
    @discardableResult
    mutating func move(to next: TransferState) -> Bool {
        guard state == next || state.allows(next) else { return false }
        state = next
        return true
    }
}

/// What a progress event of a transfer says beyond the shared fields: read inside the
/// transfer's lock with them (`TransferBase.withProgress`).
struct TransferProgress: Sendable {
    let direction: TransferInfo.Direction
    /// Bytes the receiver holds (confirmed to the sender, verified by the receiver).
    let done: Int64
    let resent: Int64?
    /// Where a received file or folder was put.
    let path: String?
}

/// What never changes in a transfer: identity, peer, size, its `io` queue.
struct TransferIdentity: Sendable {
    let id: TransferID
    let peerKey: String
    let peer: PeerRef
    let name: String
    let totalSize: Int64
    let fileCount: Int
    /// Blocking file I/O for this transfer runs here, never on the node's queue.
    let io: DispatchQueue
    let started = ContinuousClock.now
    /// When it started, unix ms: its place in `transfers` (newest first).
    let startedAt = Int64((Date().timeIntervalSince1970 * 1000).rounded())

    init(_ offer: TransferOffer, peerKey: String, peer: PeerRef) {
        id = offer.id
        self.peerKey = peerKey
        self.peer = peer
        name = offer.name
        totalSize = offer.entries.reduce(0) { $0 + Int64($1.size) }
        fileCount = offer.entries.count
        io = DispatchQueue(label: "syncpeer.transfer.\(offer.id.description.prefix(8))")
    }
}

/// What both directions share: identity, peer, progress and observers. Each transfer is a
/// final class whose mutable fields sit in one `Mutex` (`TransferShared` and its own), so it
/// may hop between the node's queue and its `io` queue: every field is reached through the
/// lock, and the compiler checks it.
protocol TransferBase: AnyObject, Sendable {
    var identity: TransferIdentity { get }
    /// Runs `body` on the shared fields inside the transfer's lock (short and pure: no
    /// call out, no other lock).
    func withShared<R: Sendable>(_ body: (inout TransferShared) -> R) -> R
    /// As `withShared`, with what an event says of the transfer's bytes, in the same lock.
    func withProgress<R: Sendable>(_ body: (inout TransferShared, TransferProgress) -> R) -> R
}

extension TransferBase {
    var id: TransferID { identity.id }
    var peerKey: String { identity.peerKey }
    var peer: PeerRef { identity.peer }
    var name: String { identity.name }
    var totalSize: Int64 { identity.totalSize }
    var fileCount: Int { identity.fileCount }
    var io: DispatchQueue { identity.io }
    var startedAt: Int64 { identity.startedAt }

    var sessionID: UInt64? {
        get { withShared { $0.sessionID } }
        set { withShared { $0.sessionID = newValue } }
    }
    var state: TransferState { withShared { $0.state } }
    var isFinished: Bool { withShared { $0.state.isFinished } }
    var recordFailure: String? {
        get { withShared { $0.recordFailure } }
        set { withShared { $0.recordFailure = newValue } }
    }
    var pauseReason: String? {
        get { withShared { $0.pauseReason } }
        set { withShared { $0.pauseReason = newValue } }
    }

    func addObserver(_ observer: TransferObserver) {
        withShared { $0.observers.append(observer) }
    }

    /// Takes the observers away (they stop following the transfer): the caller answers them.
    func takeObservers() -> [TransferObserver] {
        withShared { shared in
            defer { shared.observers = [] }
            return shared.observers
        }
    }

    /// Moves to `next` when `TransferState.allows` the step (`TransferShared.move`).
    @discardableResult
    func move(to next: TransferState) -> Bool {
        withShared { $0.move(to: next) }
    }

    func elapsedSeconds() -> Double {
        Self.seconds(ContinuousClock.now - identity.started)
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// The fields of a transfer kept inside its lock: the shared ones and its direction's.
protocol TransferFields: Sendable {
    var shared: TransferShared { get set }
    /// What an event says of its bytes.
    var progress: TransferProgress { get }
}

/// A transfer whose fields (`TransferFields`) are reached through its lock (`with`).
protocol LockedTransfer: TransferBase {
    associatedtype Fields: TransferFields
    /// Runs `body` on the fields inside the lock (short and pure: no call out, no other lock).
    func with<R: Sendable>(_ body: (inout Fields) -> R) -> R
}

extension LockedTransfer {
    func withShared<R: Sendable>(_ body: (inout TransferShared) -> R) -> R {
        with { body(&$0.shared) }
    }

    func withProgress<R: Sendable>(_ body: (inout TransferShared, TransferProgress) -> R) -> R {
        with { fields in
            let progress = fields.progress
            return body(&fields.shared, progress)
        }
    }
}

/// A file being hashed for a streamed manifest, on a thread of its own. `stop()` (any
/// thread) ends it at its next chunk.
final class HashingJob: Sendable {
    private let stopped = Mutex(false)

    func stop() { stopped.withLock { $0 = true } }
    var isStopped: Bool { stopped.withLock { $0 } }
}
