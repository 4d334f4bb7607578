internal import PeerCrypto
internal import PeerWire
internal import Synchronization

extension Session {
    /// What changes during a session, held by `Session` behind one `Mutex`: its state machine,
    /// the times of its last frames, its invitation, pairing callbacks, why it ended, redial and
    /// relay bookkeeping and the keepalive ping.
    ///
    /// The node's queue still orders what happens to a session (a read, then a write, of
    /// `session.machine` in `ConnectionService.perform` is one step on that queue); the lock
    /// makes each access safe from any thread, and the compiler checks it.
    struct State {
        var machine: SessionMachine
        var lastReceived: ContinuousClock.Instant
        var lastSent: ContinuousClock.Instant
        var invitationID: String?
        var invitationDeadline: ContinuousClock.Instant?
        var pairCompletion: (@Sendable (Result<PeerRef, EngineError>) -> Void)?
        var pairProgress: (@Sendable (NodeEvent) -> Void)?
        var nextMessageID: UInt64 = 1
        var closeReason: String?
        var redialAllowed = true
        var askedLater = false
        var replaced = false
        var droppedFrames = 0
        var source: String?
        var relayHost: String?
        var nextDirectTry: ContinuousClock.Instant?
        var directTries = 0
        var expectedCertificate: CertificateID?
        var pingInFlight: (nonce: UInt64, sent: ContinuousClock.Instant)?
        var roundTrip: Duration?
        var lastPingSent: ContinuousClock.Instant?

        init(role: SessionMachine.Role, now: ContinuousClock.Instant) {
            machine = SessionMachine(role: role)
            lastReceived = now
            lastSent = now
        }

        /// The peer's pong: the answer to our ping measures the round trip.
        mutating func pongReceived(_ nonce: UInt64, at now: ContinuousClock.Instant) {
            guard let ping = pingInFlight, ping.nonce == nonce else { return }
            roundTrip = now - ping.sent
            pingInFlight = nil
        }
    }
}

/// `Session`'s state, field by field, for the code that reads or sets one at a time (on the
/// node's queue: one lock each). The per-frame paths use the methods that take the lock
/// once for all they need (`received`, `send`).
extension Session {
    var machine: SessionMachine { get { self[\.machine] } set { self[\.machine] = newValue } }
    var lastReceived: ContinuousClock.Instant { get { self[\.lastReceived] } set { self[\.lastReceived] = newValue } }
    var lastSent: ContinuousClock.Instant { get { self[\.lastSent] } set { self[\.lastSent] = newValue } }
    var invitationID: String? { get { self[\.invitationID] } set { self[\.invitationID] = newValue } }
    var invitationDeadline: ContinuousClock.Instant? { get { self[\.invitationDeadline] } set { self[\.invitationDeadline] = newValue } }
    /// Called once when a pairing this node started ends (connected, or refused).
    var pairCompletion: (@Sendable (Result<PeerRef, EngineError>) -> Void)? { get { self[\.pairCompletion] } set { self[\.pairCompletion] = newValue } }
    /// Told when our invitation reached the peer (it now shows the SAS).
    var pairProgress: (@Sendable (NodeEvent) -> Void)? { get { self[\.pairProgress] } set { self[\.pairProgress] = newValue } }
    var nextMessageID: UInt64 { get { self[\.nextMessageID] } set { self[\.nextMessageID] = newValue } }
    var closeReason: String? { get { self[\.closeReason] } set { self[\.closeReason] = newValue } }
    /// False once the session ended in a way that must not be undone by redialling
    /// (the user disconnected or unpaired, or the peer closed it on purpose).
    var redialAllowed: Bool { get { self[\.redialAllowed] } set { self[\.redialAllowed] = newValue } }
    /// The peer closed it with `tryLater`: redialled with the back-off of its earlier refusals.
    var askedLater: Bool { get { self[\.askedLater] } set { self[\.askedLater] = newValue } }
    /// Ended as the loser of two sessions with one device (`ConnectionService.begin`, or the
    /// peer's `close(normal, "duplicate connection")`): its transfers go on on the other.
    var replaced: Bool { get { self[\.replaced] } set { self[\.replaced] = newValue } }
    /// Frames dropped because the peer is not paired yet.
    var droppedFrames: Int { get { self[\.droppedFrames] } set { self[\.droppedFrames] = newValue } }
    /// The address the connection came from (accepted sessions): the key of the caps on
    /// unpaired sessions per source. Nil for sessions we dialled.
    var source: String? { get { self[\.source] } set { self[\.source] = newValue } }
    /// The relay's host when the session runs through a relay (ConnectionService+Relay).
    var relayHost: String? { get { self[\.relayHost] } set { self[\.relayHost] = newValue } }
    /// While relayed: when a direct path is tried next, and how many were tried (ConnectionService+Paths).
    var nextDirectTry: ContinuousClock.Instant? { get { self[\.nextDirectTry] } set { self[\.nextDirectTry] = newValue } }
    var directTries: Int { get { self[\.directTries] } set { self[\.directTries] = newValue } }
    /// The certificate ID the user paired by (`pair CERTIFICATE-ID`): the peer's certificate
    /// must have it, or the pairing is undone.
    var expectedCertificate: CertificateID? { get { self[\.expectedCertificate] } set { self[\.expectedCertificate] = newValue } }
    /// The last keepalive round trip.
    var roundTrip: Duration? { self[\.roundTrip] }
    /// When we last pinged the peer (keepalive or to measure the round trip).
    var lastPingSent: ContinuousClock.Instant? { self[\.lastPingSent] }

    /// One field of the state, read or set under the lock.
    private subscript<T: Sendable>(field: WritableKeyPath<State, T>) -> T {
        get { state.withLock { $0[keyPath: field] } }
        set { state.withLock { $0[keyPath: field] = newValue } }
    }

    /// A frame from the peer, on the node's queue: notes when it came (and a pong's round
    /// trip) and hands it to the state machine, under one lock.
    func received(_ frame: Frame) -> [SessionMachine.Action] {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.lastReceived = now
            if case let .pong(nonce) = frame { state.pongReceived(nonce, at: now) }
            return state.machine.handle(.frame(frame))
        }
    }

    /// A new keepalive nonce, remembered with the time it goes out.
    func pingSent() -> UInt64 {
        let nonce = UInt64.random(in: 0...UInt64.max)
        let now = ContinuousClock.now
        state.withLock { state in
            state.pingInFlight = (nonce, now)
            state.lastPingSent = now
        }
        return nonce
    }

    /// The peer's pong: the answer to our ping measures the round trip.
    func pongReceived(_ nonce: UInt64) {
        let now = ContinuousClock.now
        state.withLock { $0.pongReceived(nonce, at: now) }
    }
}
