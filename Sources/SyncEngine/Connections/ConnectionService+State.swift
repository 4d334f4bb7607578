internal import Dispatch
internal import PeerCrypto
internal import PeerNet
internal import Synchronization

/// The connection service's changing state (`ConnectionService.state`, one `Mutex`), and the
/// accessors that read (or, for a few small values, write) it from outside the lock. Mutex is
/// not recursive: code inside a `withLock` closure touches only `State`, never these accessors.
extension ConnectionService {
    /// What changes after `init` (see the type's comment).
    struct State {
        /// Its display name changes with `rename` (on the queue): new hellos carry it.
        var identity: Identity
        /// The layers above the sessions (set once by the node before `listen`).
        weak var observer: (any SessionObserver & Sendable)?
        /// Discovery, when it is on.
        weak var nearby: (any NearbyPeers & Sendable)?
        var sessions: [UInt64: Session] = [:]
        var nextSessionID: UInt64 = 1
        var listener: TCPListener?
        var listenPort: UInt16 = 0
        var listenHost = ""
        var redials: [String: Redial] = [:]
        /// Devices whose pairing could not be read when their session ended: read again until
        /// it can be, then redialled (`planRedial`).
        var pairingRechecks: Set<String> = []
        /// Paired devices that refused us with `tryLater` since we last connected to them: the
        /// delay before the next redial after such a refusal (doubling up to `redialMaximum`).
        var laterDelays: [String: Duration] = [:]
        var dialsInFlight: Set<String> = []
        var timer: (any DispatchSourceTimer)?
        /// When the timer is set to fire (nil: not set, or firing now); see ConnectionService+Timer.
        var timerDue: ContinuousClock.Instant?
        var stopped = false
        /// Unpaired sessions by source.
        var unpairedSessions = SourceSlots<Session>(total: maxUnpairedSessions, perSource: maxUnpairedSessionsPerSource)
        /// Connections refused by the caps so far (reported at 1, 10, 100, ...).
        var refusedConnections = 0
        /// Our certificate for relays and discovery servers, made when first asked for
        /// (`.some(nil)`: it cannot be made).
        var tlsIdentity: TLSIdentity?? = nil
        /// What global discovery servers said of paired peers (ConnectionService+GlobalDiscovery).
        var globalFound = GlobalFound()
        /// How long after a failed undo of a pairing it is tried again (ConnectionService+Certificates).
        var undoRetry: Duration = .seconds(30)
    }

    var identity: Identity {
        get { state.withLock { $0.identity } }
        set { state.withLock { $0.identity = newValue } }
    }

    var undoRetry: Duration {
        get { state.withLock { $0.undoRetry } }
        set { state.withLock { $0.undoRetry = newValue } }
    }

    var observer: (any SessionObserver & Sendable)? {
        get { state.withLock { $0.observer } }
        set { state.withLock { $0.observer = newValue } }
    }

    var nearby: (any NearbyPeers & Sendable)? {
        get { state.withLock { $0.nearby } }
        set { state.withLock { $0.nearby = newValue } }
    }

    /// A snapshot of the sessions (by id); changes go through `state`.
    var sessions: [UInt64: Session] { state.withLock { $0.sessions } }
    var listenPort: UInt16 { state.withLock { $0.listenPort } }
    var listenHost: String { state.withLock { $0.listenHost } }
    var stopped: Bool { state.withLock { $0.stopped } }

    /// Our certificate for relays and discovery servers (ConnectionService+Certificates),
    /// made the first time it is asked for (outside the lock: it signs).
    var tlsIdentity: TLSIdentity? {
        if let made = state.withLock({ $0.tlsIdentity }) { return made }
        let made = try? identity.tlsIdentity()
        return state.withLock { state in
            if state.tlsIdentity == nil { state.tlsIdentity = .some(made) }
            return state.tlsIdentity ?? nil
        }
    }
}
