internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// Connections and pairing: the listener, dialling, handshakes, the sessions with peers
/// (one per device), keepalive and dead-peer detection, redial with back-off, invitations
/// and the pinned keys of paired peers. Its work is ordered on `queue` (the node's), its
/// state held in `state` (see Ownership below); blocking work (accept, connect, handshakes,
/// reads) runs on dedicated threads and hands its results to `queue`.
///
///     accept thread ─▶ handshake thread ─┐
///     dial thread ───▶ handshake ────────┼─▶ queue: SessionMachine → actions ─▶ send queue / events / index
///     reader thread per session ─────────┘        ▲              └─▶ SessionObserver (transfers, folders, streams)
///     timer (next deadline): keepalive, dead peers, invitation expiry, redial ┘
///
/// It plays `PeerLink` for the services above the sessions and reports to them through
/// `SessionObserver`; discovery reaches it through `NearbyPeers` (both played by the node,
/// the composition root). ConnectionServiceTests run two of them in one process over
/// loopback with in-memory indexes.
///
/// Ownership (checked by the compiler): what changes after `init` lives in `state`, behind a
/// `Mutex`; every other stored property is a Sendable `let`. `queue` still orders the work:
/// the threads it starts hop to it for everything they do with sessions, and each entry point
/// that must run there says so with `dispatchPrecondition`. A `withLock` closure only reads or
/// writes `State`: events, callbacks, sessions' methods and I/O run after it returns.
final class ConnectionService: Reporting, Sendable {
    let queue: DispatchQueue
    let config: NodeConfig
    let index: NodeIndex
    let events: EventBus
    /// The Hello's feature names (what the layers above speak).
    let features: [String]
    /// What changes after `init` (ConnectionService+State).
    let state: Mutex<State>

    /// Frames an unpaired peer may send (dropped) before its connection is closed.
    static let maxDroppedFrames = 64
    /// Handshakes in progress at once, in all and per source address; see `SourceSlots`
    /// (a quieter address takes the oldest slot of the busiest one; else the connection is
    /// closed at once). A thread runs each handshake, so this bounds threads too.
    static let maxPendingHandshakes = 32
    static let maxPendingHandshakesPerSource = 8
    /// Sessions with unknown peers (completed handshakes, not paired), in all and per source
    /// address: each holds an invitation, a reader thread and socket buffers.
    static let maxUnpairedSessions = 32
    static let maxUnpairedSessionsPerSource = 4
    /// The largest frame body an unknown peer may send before the user accepts it (a
    /// message, which is dropped, is the largest it has any use for); larger fails the session.
    static let maxUnpairedFrameBody = WireLimits.maxMessageBody + 1_024
    let pendingHandshakes = Mutex(SourceSlots<TCPConnection>(total: maxPendingHandshakes,
                                                             perSource: maxPendingHandshakesPerSource))
    let nextHandshakeID = Atomic<UInt64>(1)
    /// The relays joined now (ConnectionService+Relay), closed by `stop`.
    let relayMemberships = Mutex<[RelayMembership]>([])
    /// The relays chosen from the relay pools (ConnectionService+RelayPool).
    let poolRelays = Mutex<[RelayEndpoint]>([])

    typealias Redial = TimerMachine.Redial

    init(queue: DispatchQueue, identity: Identity, config: NodeConfig, index: NodeIndex, events: EventBus, features: [String]) {
        self.queue = queue
        self.state = Mutex(State(identity: identity))
        self.config = config
        self.index = index
        self.events = events
        self.features = features
    }

    func emit(_ event: NodeEvent) {
        events.emit(event)
    }

    // MARK: - Lifecycle

    /// Binds the listener and starts accepting (any thread but `queue`). Returns the bound
    /// address as "host:port", and the port and numeric host for discovery.
    func listen() throws(EngineError) -> (address: String, port: UInt16, host: String) {
        let address: HostPort
        do { address = try HostPort(parsing: config.listen) } catch { throw .invalidArgument("--listen: \(error.description)") }
        let listener: TCPListener
        do { listener = try TCPListener(host: address.host, port: address.port) } catch {
            throw .connection("cannot listen on \(config.listen)", error)
        }
        let bound = HostPort(host: address.host, port: listener.port).description
        queue.sync {
            state.withLock {
                $0.listener = listener
                $0.listenPort = listener.port
                $0.listenHost = address.host
            }
            self.emit(.listening(.init(address: bound, time: now())))
        }
        OSThread.start(name: "syncpeer-accept") { [self] in acceptLoop(listener) }
        return (bound, listener.port, listener.host)
    }

    /// Closes every session (telling peers), the listener and the timer (any thread but
    /// `queue`); returns once the goodbye frames are written.
    func stop() {
        let (closing, listener): ([Session], TCPListener?) = queue.sync {
            let (timer, all, listener) = state.withLock { state in
                state.stopped = true
                let timer = state.timer
                state.timer = nil
                return (timer, Array(state.sessions.values), state.listener)
            }
            timer?.cancel()
            for session in all {
                session.closeReason = "the node is shutting down"
                perform(session.machine.handle(.localShutdown), on: session)
            }
            return (all, listener)
        }
        listener?.close()
        for membership in relayMemberships.withLock({ $0 }) { membership.close() }
        // Every session's queued frames (its goodbye last) get a moment to go out. A peer
        // that reads nothing (a stalled route, its socket's buffers full) does not hold the
        // shutdown for the send timeout: its channel is closed after that, which wakes a
        // writer blocked on it (a queued send, or a transfer's chunk written from its I/O queue).
        let written = DispatchGroup()
        for session in closing {
            written.enter()
            session.sendQueue.async {
                try? session.channel.flush()
                written.leave()
            }
        }
        _ = written.wait(timeout: .now() + Self.goodbyeGrace)
        for session in closing { session.channel.close() }
    }

    /// The reason of the close frame that ends the loser of two sessions with one device.
    static let duplicateReason = "duplicate connection"

    /// How long a stopping node waits for its sessions' last frames to be written.
    static let goodbyeGrace: DispatchTimeInterval = .seconds(2)

    // MARK: - Sessions

    func register(_ channel: SecureChannel, role: SessionMachine.Role, dialAddress: String?) -> Session {
        dispatchPrecondition(condition: .onQueue(queue))
        let id = state.withLock { state in
            defer { state.nextSessionID += 1 }
            return state.nextSessionID
        }
        let session = Session(id: id, channel: channel, role: role, dialAddress: dialAddress)
        state.withLock { $0.sessions[id] = session }
        return session
    }

    func begin(_ session: Session, standing: SessionMachine.PeerStanding) {
        dispatchPrecondition(condition: .onQueue(queue))
        // One session per device: when two exist (both dialled at once), keep the one
        // dialled by the smaller device ID, so both ends keep the same one, and end the
        // other even when it is connected already (its transfers resume on the one kept).
        // Two dialled by the same device: the newer one (that device dialled again, so the
        // older one is stale on its side, e.g. it restarted).
        // A direct session always wins over a relayed one (both ends know which is relayed).
        if standing == .paired,
           let other = otherLiveSession(than: session) {
            let myKey = identity.deviceID.compact
            func initiatorKey(_ s: Session) -> String { s.machine.role == .initiator ? myKey : s.deviceKey }
            let keepNew = (session.relayHost == nil) != (other.relayHost == nil)
                ? session.relayHost == nil
                : initiatorKey(session) <= initiatorKey(other)
            let loser = keepNew ? other : session
            loser.closeReason = Self.duplicateReason
            loser.redialAllowed = false
            loser.replaced = true
            loser.pairCompletion = nil
            loser.send([.close(code: .normal, reason: Self.duplicateReason)])
            if loser === session {
                _ = state.withLock { $0.sessions.removeValue(forKey: session.id) }
                session.closeAfterPendingSends()
                return
            }
            perform(loser.machine.handle(.transportClosed(Self.duplicateReason)), on: loser)
        }
        if standing == .unknown, let source = session.source {
            guard admitUnpaired(session, from: source) else { return }
            // Until the user accepts it, an unknown peer has nothing large to say.
            session.channel.limitFrames(to: Self.maxUnpairedFrameBody)
        }
        let nearby = state.withLock { state in
            state.redials[session.deviceKey] = nil
            return state.nearby
        }
        nearby?.release(session.deviceKey)
        emit(.state(.init(peer: session.peer, state: .connecting, address: session.channel.remoteDescription, time: now())))
        perform(session.machine.handle(.handshakeCompleted(standing)), on: session)
        startReader(session)
        wakeTimer()  // its keepalive and dead-peer deadlines
    }

    /// Reads the peer's frames and hands them to `queue`; pauses while the session's flow
    /// says we hold too much for this peer (back-pressure, see `SessionFlow`).
    private func startReader(_ session: Session) {
        let channel = session.channel
        let flow = session.flow
        let id = session.id
        OSThread.start(name: "syncpeer-reader") { [self] in
            while flow.waitForRoom() {
                do throws(NetError) {
                    guard let frame = try channel.receive() else {
                        channel.close()
                        queue.async { [self] in transportEnded(id, "peer closed the connection") }
                        return
                    }
                    let size = SessionFlow.size(of: frame)
                    flow.received(size)
                    queue.async { [self] in
                        defer { flow.handled(size) }
                        guard let session = state.withLock({ $0.sessions[id] }) else { return }
                        perform(session.received(frame), on: session)
                    }
                } catch {
                    channel.close()
                    queue.async { [self] in transportEnded(id, error.description) }
                    return
                }
            }
        }
    }

    private func transportEnded(_ id: UInt64, _ reason: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let session = state.withLock({ $0.sessions[id] }) else { return }
        perform(session.machine.handle(.transportClosed(session.closeReason ?? reason)), on: session)
    }

    /// Ends `session` at once for a protocol violation by the peer: the close frame says
    /// why, and it is not redialled.
    func endForViolation(_ session: Session, _ reason: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        session.closeReason = "protocol violation: \(reason)"
        session.redialAllowed = false
        session.send([.close(code: .protocolError, reason: String(reason.utf8.prefix(WireLimits.maxCloseReason)) ?? "protocol violation")])
        perform(session.machine.handle(.transportClosed(session.closeReason!)), on: session)
    }

    /// Carries out a state machine's actions.
    func perform(_ actions: [SessionMachine.Action], on session: Session) {
        dispatchPrecondition(condition: .onQueue(queue))
        for action in actions {
            switch action {
            case let .send(frame):
                // At once, in order: later actions (a connected session starts transfers) may
                // send too, and the peer must see the machine's frames first.
                session.send([frame])
            case let .state(state):
                // "connecting" is reported once by begin(); closed once by finish().
                if state == .closed || state == .awaitingLocalDecision || state == .awaitingPeerDecision { continue }
                if state == .connected {
                    self.state.withLock {
                        $0.unpairedSessions.release(id: session.id)
                        $0.laterDelays[session.deviceKey] = nil
                    }
                    markSeen(session)
                    session.pairCompletion?(.success(session.peer))
                    session.pairCompletion = nil
                    observer?.sessionConnected(session)
                    sendCertificate(on: session)
                }
                emit(.state(.init(peer: session.peer, state: Self.publicState(state), time: now())))
            case .raiseInvitation:
                let invitation = Self.newInvitationID()
                session.invitationID = invitation
                session.invitationDeadline = .now + config.invitationTimeout
                wakeTimer(at: session.invitationDeadline!)
                emit(.invitation(.init(peer: session.peer, invitation: invitation,
                                       code: session.channel.shortAuthenticationString, context: session.context,
                                       address: session.channel.remoteDescription, time: now())))
                if config.autoAccept {
                    emit(.invitationClosed(.init(peer: session.peer, invitation: invitation, outcome: "accepted", time: now())))
                    session.channel.limitFrames(to: WireLimits.maxFrameBody)
                    perform(session.machine.handle(.localAccept), on: session)
                    return
                }
            case .invitationPending:
                let event = NodeEvent.invitationPending(.init(peer: session.peer, code: session.channel.shortAuthenticationString, time: now()))
                emit(event)
                session.pairProgress?(event)
            case .pinPeer:
                pin(session)
            case let .pinCertificate(der):
                if !pinCertificate(der, from: session) { return }
            case let .deliverMessage(id, body):
                events.deliverMessage(from: session.peer, body: body)
                emit(.message(.init(peer: session.peer, id: id, text: String(decoding: body, as: UTF8.self), time: now())))
            case let .transfer(frame):
                observer?.transferFrame(frame, on: session)
            case let .stream(frame):
                if observer?.streamFrame(frame, on: session) == false { return }
            case let .dropped(type):
                session.droppedFrames += 1
                if session.droppedFrames <= Self.maxDroppedFrames {
                    emit(.dropped(.init(peer: session.peer, reason: "\(type) frame from a peer that is not paired was dropped", time: now())))
                } else {
                    // An unpaired peer that keeps talking is not waiting politely: end it.
                    session.closeReason = "too many frames before pairing (\(Self.maxDroppedFrames))"
                    session.redialAllowed = false
                    session.send([.close(code: .protocolError, reason: "too many frames before pairing")])
                    perform(session.machine.handle(.transportClosed(session.closeReason!)), on: session)
                    return
                }
            case let .pairingRejected(status):
                emit(.pairingRejected(.init(peer: session.peer, outcome: "\(status)", time: now())))
                session.pairCompletion?(.failure(.refused("\(session.peer.name) \(status) the invitation")))
                session.pairCompletion = nil
            case let .peerClosed(code):
                // A peer that shuts down may come back, and one that refused us for a passing
                // reason asks to be dialled again (`tryLater`: with back-off): keep redialling.
                // One that ended the session on purpose (disconnect, refusal, or a code this
                // version does not know) is left alone.
                // A peer that ends one of two sessions with us ends the duplicate (see
                // `begin`), not us: discovery may still dial it.
                if code == .normal && session.closeReason == "peer closed the session: \(Self.duplicateReason)" {
                    session.replaced = true
                }
                if code == .tryLater {
                    session.askedLater = true
                } else if code != .shuttingDown {
                    session.redialAllowed = false
                    if otherLiveSession(than: session) == nil { nearby?.holdOff(session.deviceKey) }
                }
                if code == .unpaired { peerUnpairedUs(session) }
            case let .refused(reason):
                emit(.refused(.init(peer: session.peer, reason: reason, time: now())))
                session.pairCompletion?(.failure(.refused(reason)))
                session.pairCompletion = nil
            case let .ended(reason):
                session.closeReason = session.closeReason ?? reason
            case .closeTransport:
                session.closeAfterPendingSends()
            }
        }
        if session.machine.state == .closed { finish(session) }
    }

    /// Removes a closed session, reports it, and plans a redial for a paired peer.
    private func finish(_ session: Session) {
        let (removed, observer) = state.withLock { state in
            let removed = state.sessions.removeValue(forKey: session.id) != nil
            if removed { state.unpairedSessions.release(id: session.id) }
            return (removed, state.observer)
        }
        guard removed else { return }
        session.flow.cancel()
        session.closeAfterPendingSends()
        let reason = session.closeReason ?? "closed"
        observer?.sessionEnded(session, reason: reason)
        emit(.state(.init(peer: session.peer, state: .notConnected, reason: reason, time: now())))
        session.pairCompletion?(.failure(.network("session with \(session.peer.name) ended: \(reason)")))
        session.pairCompletion = nil
        guard !stopped, session.redialAllowed else { return }
        planRedial(session.peer, device: session.deviceKey, later: session.askedLater)
    }

    /// The Multipeer-style state names: notConnected, connecting, connected.
    static func publicState(_ state: SessionMachine.State) -> SessionState {
        switch state {
        case .awaitingLocalDecision, .awaitingPeerDecision: return .connecting
        case .connected: return .connected
        case .closed: return .notConnected
        }
    }

    // MARK: - Redials

    /// Plans a redial of every paired peer (at start), and dials the static peers.
    func scheduleInitialRedials() {
        let records: [PeerRecord]
        do { records = try index.peers() } catch {
            // Static peers are still dialled (each only once: paired ones are pinned again).
            emitError(nil, "cannot read the paired peers to reconnect to them: \(error.description)")
            records = []
        }
        var initial: [String: Redial] = [:]
        for record in records where record.trust == .paired {
            if let address = record.addresses.first ?? globalRedialAddress(record.deviceID) {
                initial[record.deviceID] = Redial(address: address, nextAttempt: .now, delay: config.redialInitial)
            }
        }
        state.withLock { $0.redials.merge(initial) { _, new in new } }
        for address in config.staticPeers where !records.contains(where: { $0.addresses.first == address }) {
            startDial(address: address, expected: nil, context: nil, progress: nil, completion: nil)
        }
    }

    /// Where to redial a paired device on its `attempt`-th try: its discovered addresses
    /// first (fresh), then the ones stored in the index (last known first, static peers
    /// among them), in turn.
    func redialAddress(for device: String, attempt: Int, fallback: String) -> String {
        let list = knownAddresses(of: device)
        return list.isEmpty ? fallback : list[attempt % list.count]
    }

    /// Every address a paired device may be dialled at, in that order, each once.
    func knownAddresses(of device: String) -> [String] {
        dispatchPrecondition(condition: .onQueue(queue))
        var list = nearby?.addresses(of: device) ?? []
        list += state.withLock { $0.globalFound.addresses[device] } ?? []
        // Unreadable: the other addresses only (read again on the next attempt; a redial
        // that has none keeps the one it had).
        list += (try? index.peer(deviceID: device))?.addresses ?? []
        var seen: Set<String> = []
        return list.filter { seen.insert($0).inserted }
    }

    // MARK: - Lookup

    /// An index that cannot be read fails the lookup with its cause (not "no known peer").
    private func candidates() throws(EngineError) -> [PeerResolver.Candidate] {
        dispatchPrecondition(condition: .onQueue(queue))
        var list: [PeerResolver.Candidate] = []
        var seen: Set<String> = []
        let records: [PeerRecord]
        do throws(IndexError) { records = try index.peers() } catch { throw .index(error) }
        for record in records where record.trust == .paired {
            list.append(.init(deviceID: displayID(record.deviceID), name: record.name, addresses: record.addresses))
            seen.insert(record.deviceID)
        }
        for session in sessions.values where !seen.contains(session.deviceKey) {
            list.append(.init(deviceID: session.peer.id.description, name: session.peer.name, addresses: session.dialAddress.map { [$0] } ?? []))
            seen.insert(session.deviceKey)
        }
        return list
    }

    /// The peer a name, device ID (or prefix) or address the user typed means: paired peers,
    /// then live sessions; discovery's nearby names make a better "not found".
    func resolve(_ text: String) throws(EngineError) -> PeerResolver.Candidate {
        let candidates = try candidates()
        do throws(PeerResolver.Failure) {
            switch try PeerResolver.resolve(text, among: candidates, nearby: nearby?.nearbyUnpairedNames() ?? []) {
            case let .peer(candidate): return candidate
            case let .address(address): throw PeerResolver.Failure.unknown(address)
            }
        } catch {
            throw .notFound(error.description)
        }
    }

    func liveSession(for text: String) throws(EngineError) -> Session {
        let candidate = try resolve(text)
        let key = candidate.deviceID.filter { $0 != "-" }
        guard let session = sessions.values.first(where: { $0.deviceKey == key && $0.machine.state != .closed }) else {
            throw .notConnected("\(candidate.name) is not connected")
        }
        return session
    }

    func connectedSession(for text: String) throws(EngineError) -> Session {
        let session = try liveSession(for: text)
        guard session.machine.state == .connected else {
            throw .notConnected("\(session.peer.name) is not paired yet (the invitation is open)")
        }
        return session
    }

    /// Another session with the device of `session` that is not closed (a duplicate).
    func otherLiveSession(than session: Session) -> Session? {
        dispatchPrecondition(condition: .onQueue(queue))
        return sessions.values.first { $0.id != session.id && $0.deviceKey == session.deviceKey && $0.machine.state != .closed }
    }

    /// Whether a session with `device` exists in a state `present` accepts.
    func hasSession(device: String, where present: (SessionMachine.State) -> Bool) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        return sessions.values.contains { $0.deviceKey == device && present($0.machine.state) }
    }

    /// The paired peer `text` names (connected or not).
    func pairedPeer(for text: String) throws(EngineError) -> PeerRecord {
        let candidate = try resolve(text)
        let record: PeerRecord?
        do { record = try index.peer(deviceID: candidate.deviceID.filter { $0 != "-" }) } catch { throw .index(error) }
        guard let record, record.trust == .paired else { throw .notFound("\(candidate.name) is not paired") }
        return record
    }

    func displayID(_ compact: String) -> String {
        (try? DeviceID(parsing: compact))?.description ?? compact
    }

    /// A peer of the index as results show it; a device ID the index holds that does not
    /// parse is damaged data.
    func peerRef(_ record: PeerRecord) throws(EngineError) -> PeerRef {
        try PeerRef.indexed(device: record.deviceID, name: record.name, index: index)
    }

    static func sameName(_ a: String, _ b: String) -> Bool {
        func fold(_ s: String) -> String {
            UnicodeForms.nfkc(s).lowercased().trimmingWhitespace()
        }
        return fold(a) == fold(b)
    }

    static func newInvitationID() -> String {
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        return String((0..<6).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] })
    }
}

extension ConnectionService: PeerLink {
    // On `queue`: the sessions' state is theirs.
    func session(_ id: UInt64) -> LinkSession? {
        dispatchPrecondition(condition: .onQueue(queue))
        return state.withLock { $0.sessions[id] }?.link
    }

    func connectedSession(device deviceKey: String) -> LinkSession? {
        dispatchPrecondition(condition: .onQueue(queue))
        return sessions.values.first { $0.deviceKey == deviceKey && $0.machine.state == .connected }?.link
    }

    func connectedSessions() -> [LinkSession] {
        dispatchPrecondition(condition: .onQueue(queue))
        return sessions.values.filter { $0.machine.state == .connected }.sorted { $0.id < $1.id }.map(\.link)
    }

    func send(_ frames: [Frame], on id: UInt64) {
        dispatchPrecondition(condition: .onQueue(queue))
        state.withLock { $0.sessions[id] }?.send(frames)
    }
}
