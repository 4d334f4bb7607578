internal import Dispatch
internal import Foundation
internal import PeerCrypto
internal import PeerIndex
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// The node: the composition root that owns the listener, the sessions with peers, the
/// index and the event bus (`EventBus`, which owns the subscribers). Every mutable property is confined to `queue`;
/// blocking work (accept, connect, handshakes, reads) runs on dedicated threads and hands
/// its results to `queue`.
///
///     accept thread ─▶ handshake thread ─┐
///     dial thread ───▶ handshake ────────┼─▶ queue: SessionMachine → actions ─▶ send queue / events / index
///     reader thread per session ─────────┘        ▲
///     timer (1 s): keepalive, dead peers, invitation expiry, redial ┘
public final class Node: Reporting, @unchecked Sendable {
    // @unchecked: all mutable state below is read and written only on `queue`.
    public let identity: Identity
    public let home: NodeHome
    public let config: NodeConfig
    let index: NodeIndex
    let queue = DispatchQueue(label: "syncpeer.node")

    private var listener: TCPListener?
    var sessions: [UInt64: Session] = [:]
    private var nextSessionID: UInt64 = 1
    /// Who listens to the node's events (its own lock: subscribing never waits for `queue`).
    let events = EventBus()
    var redials: [String: Redial] = [:]
    private var dialsInFlight: Set<String> = []
    private var timer: (any DispatchSourceTimer)?
    var stopped = false
    /// Sending and receiving files, folders and streams (its state confined to `queue`).
    let transfers: TransferService
    /// Shared folders: sharing, the index exchange, serving blocks (confined to `queue`).
    let folders: FolderService
    /// Advertiser, browser and the peers found (nil when discovery is off); see Node+Discovery.
    var discovery: NodeDiscovery?
    private var listenPort: UInt16 = 0
    private var listenHost = ""

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
    private let pendingHandshakes = Mutex(SourceSlots<TCPConnection>(total: maxPendingHandshakes,
                                                                     perSource: maxPendingHandshakesPerSource))
    private let nextHandshakeID = Atomic<UInt64>(1)
    /// Unpaired sessions by source (confined to `queue`).
    var unpairedSessions = SourceSlots<Session>(total: maxUnpairedSessions, perSource: maxUnpairedSessionsPerSource)
    /// Connections refused by the caps so far (reported at 1, 10, 100, ...).
    var refusedConnections = 0
    /// Streams peers opened that no consumer took yet, and consumers waiting for one
    /// (confined to `queue`; see Node+Streams).
    var unclaimedStreams: [UnclaimedStream] = []
    var streamWaiters: [StreamWaiter] = []
    private var lastStreamWaiterID: UInt64 = 0
    func nextStreamWaiterID() -> UInt64 {
        lastStreamWaiterID += 1
        return lastStreamWaiterID
    }

    typealias Redial = TimerMachine.Redial

    init(home: NodeHome, identity: Identity, index: NodeIndex, config: NodeConfig) {
        self.home = home
        self.identity = identity
        self.index = index
        self.config = config
        transfers = TransferService(queue: queue, store: index, events: events, config: config,
                                    indexedManifest: { [index] path, stamp in Self.indexedManifest(path, stamp, in: index) })
        folders = FolderService(queue: queue, index: index, events: events, config: config, localDevice: identity.deviceID.compact)
        transfers.link = self
        folders.link = self
    }

    /// Opens an initialised home (identity and index) for running a node.
    public static func open(home: NodeHome, config: NodeConfig) throws(EngineError) -> Node {
        let identity = try NodeSetup.loadIdentity(home: home)
        let index = try NodeSetup.openIndex(home)
        return Node(home: home, identity: identity, index: index, config: config)
    }

    // MARK: - Lifecycle

    /// Binds the listener and starts accepting, the timer and redials. Returns "host:port".
    public func start() throws(EngineError) -> String {
        let address: HostPort
        do { address = try HostPort(parsing: config.listen) } catch { throw .invalidArgument("--listen: \(error.description)") }
        let listener: TCPListener
        do { listener = try TCPListener(host: address.host, port: address.port) } catch {
            throw .connection("cannot listen on \(config.listen)", error)
        }
        let bound = HostPort(host: address.host, port: listener.port).description
        queue.sync {
            self.listener = listener
            self.listenPort = listener.port
            self.listenHost = address.host
            self.emit(.listening(.init(address: bound, time: now())))
        }
        let acceptThread = Thread { [self] in acceptLoop(listener) }
        acceptThread.name = "syncpeer-accept"
        acceptThread.start()

        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
        timer.setEventHandler { [weak self] in self?.tick() }
        timer.resume()
        queue.sync {
            self.timer = timer
            self.scheduleInitialRedials()
            self.folders.startFolders()
            // Paired peers are dialled now, not at the first tick (250 ms on): a restarted
            // node is back in its transfers as soon as it listens (bench "resume").
            self.tick()
        }
        do { try startDiscovery(port: listener.port, host: listener.host) } catch {
            stop()
            throw error
        }
        return bound
    }

    /// Closes every session (telling peers), the listener and the timer.
    public func stop() {
        stopDiscovery()
        folders.stopFolders()
        let (closing, listener): ([Session], TCPListener?) = queue.sync {
            stopped = true
            timer?.cancel()
            timer = nil
            let all = Array(sessions.values)
            for session in all {
                session.closeReason = "the node is shutting down"
                perform(session.machine.handle(.localShutdown), on: session)
            }
            return (all, self.listener)
        }
        listener?.close()
        // Wait until the goodbye frames are written, then close for good.
        for session in closing {
            session.sendQueue.sync {}
            session.channel.close()
        }
    }

    /// Registers a handler for every event; returns a token for `unsubscribe`. Any thread,
    /// a handler included.
    public func subscribe(_ handler: @escaping @Sendable (NodeEvent) -> Void) -> UInt64 {
        events.subscribe(handler)
    }

    public func unsubscribe(_ token: UInt64) {
        events.unsubscribe(token)
    }

    /// Registers a handler for every message's body as bytes (events carry it as text).
    public func subscribeMessages(_ handler: @escaping @Sendable (PeerRef, [UInt8]) -> Void) -> UInt64 {
        events.subscribeMessages(handler)
    }

    public func unsubscribeMessages(_ token: UInt64) {
        events.unsubscribe(token)
    }

    // MARK: - Requests (any thread)

    /// Dials HOST:PORT and invites the node there. `completion` runs once: with the peer when
    /// the session is connected (the peer accepted), or with the reason it was not.
    public func pair(address: String, context: String?,
                     progress: @escaping @Sendable (NodeEvent) -> Void = { _ in },
                     completion: @escaping @Sendable (Result<PeerRef, EngineError>) -> Void) {
        if let context, context.utf8.count > WireLimits.maxContext {
            completion(.failure(.invalidArgument("the context is \(context.utf8.count) bytes; at most \(WireLimits.maxContext) are allowed")))
            return
        }
        queue.async { [self] in
            switch pairTarget(address) {
            case let .success(target):
                startDial(address: target.address, expected: target.expected, context: context,
                          progress: progress, completion: completion)
            case let .failure(error):
                completion(.failure(error))
            }
        }
    }

    /// Makes sure a paired peer is connected: dials its last known address if needed and
    /// waits up to `timeout`. Blocks the calling thread (never call it on `queue`).
    public func ensureConnected(_ peerText: String, timeout: Duration = .seconds(15)) throws(EngineError) {
        guard let target = try dialTarget(peerText, unlessA: { $0 == .connected }) else { return }
        if let address = target.address { dial(address: address, expected: target.key, context: nil, completion: nil) }
        if waitConnected(target.key, until: .now + timeout, every: 0.05) { return }
        throw .notConnected("cannot reach \(target.name)\(target.address.map { " at \($0)" } ?? " (no known address)"): is its daemon running?")
    }

    /// Dials `peerText` when it is not connected and waits until that dial ends (connected,
    /// refused, unreachable: a peer on the network answers in milliseconds) or `patience`
    /// passes; never fails for a paired peer that is offline: a send to it is queued and goes
    /// out when it connects (a later redial, its own dial, or discovery).
    public func dialIfOffline(_ peerText: String, patience: Duration = .seconds(3)) throws(EngineError) {
        guard let target = try dialTarget(peerText, unlessA: { $0 != .closed }), let address = target.address else { return }
        let ended = Latch()
        dial(address: address, expected: target.key, context: nil) { _ in ended.set() }
        _ = waitConnected(target.key, until: .now + patience, every: 0.02, unless: { ended.isSet })
    }

    /// The peer `peerText` names, as a dial needs it (device key, name, last known address);
    /// nil when a session with it is already in a state `present` accepts.
    private func dialTarget(_ peerText: String, unlessA present: (SessionMachine.State) -> Bool) throws(EngineError)
        -> (key: String, name: String, address: String?)? {
        let plan: Result<(key: String, name: String, address: String?)?, EngineError> = queue.sync {
            do throws(EngineError) {
                let candidate = try resolve(peerText)
                let key = candidate.deviceID.filter { $0 != "-" }
                if sessions.values.contains(where: { $0.deviceKey == key && present($0.machine.state) }) { return .success(nil) }
                return .success((key, candidate.name, candidate.addresses.first))
            } catch { return .failure(error) }
        }
        return try plan.get()
    }

    /// Polls until the device `key` is connected (true), or `deadline` passes or `unless`
    /// says to stop (false). Blocks the calling thread (never call it on `queue`).
    private func waitConnected(_ key: String, until deadline: ContinuousClock.Instant, every seconds: Double,
                               unless stop: () -> Bool = { false }) -> Bool {
        while ContinuousClock.now < deadline, !stop() {
            if queue.sync(execute: { sessions.values.contains { $0.deviceKey == key && $0.machine.state == .connected } }) { return true }
            Thread.sleep(forTimeInterval: seconds)
        }
        return queue.sync { sessions.values.contains { $0.deviceKey == key && $0.machine.state == .connected } }
    }

    /// Open invitations from peers.
    public func invitations() -> [InvitationInfo] {
        queue.sync {
            sessions.values.filter { $0.invitationID != nil && $0.machine.state == .awaitingLocalDecision }
                .sorted { $0.id < $1.id }
                .map { session in
                    InvitationInfo(invitation: session.invitationID!, peer: session.peer,
                                   code: session.channel.shortAuthenticationString, context: session.context,
                                   address: session.channel.remoteDescription)
                }
        }
    }

    /// Accepts or declines an open invitation.
    public func answer(invitation: String, accept: Bool) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            let wanted = invitation.uppercased()
            guard let session = sessions.values.first(where: { $0.invitationID == wanted && $0.machine.state == .awaitingLocalDecision }) else {
                return .failure(.notFound("no open invitation '\(invitation)'; see 'syncpeer invitations'"))
            }
            if accept { session.channel.limitFrames(to: WireLimits.maxFrameBody) }
            let actions = session.machine.handle(accept ? .localAccept : .localDecline)
            emit(.invitationClosed(.init(peer: session.peer, invitation: session.invitationID,
                                         outcome: accept ? "accepted" : "declined", time: now())))
            perform(actions, on: session)
            return .success(session.peer)
        }
        return try result.get()
    }

    /// Sends a text message to a connected, paired peer; returns the peer and message ID.
    public func sendMessage(to peerText: String, text: String) throws(EngineError) -> (PeerRef, UInt64) {
        let (peer, id, _) = try sendMessage(to: peerText, bytes: Array(text.utf8), unreliable: false)
        return (peer, id)
    }

    /// Sends bytes as a message. Reliable: queued in order with every other frame.
    /// Unreliable: never queued behind bulk frames, and dropped (`sent` false) when the
    /// link to the peer is saturated.
    public func sendMessage(to peerText: String, bytes body: [UInt8], unreliable: Bool) throws(EngineError) -> (peer: PeerRef, id: UInt64, sent: Bool) {
        guard body.count <= WireLimits.maxMessageBody else {
            throw .invalidArgument("the message is \(body.count) bytes; at most \(WireLimits.maxMessageBody) are allowed")
        }
        let result: Result<(PeerRef, UInt64, Bool), EngineError> = queue.sync {
            do throws(EngineError) {
                let session = try connectedSession(for: peerText)
                let id = session.nextMessageID
                session.nextMessageID += 1
                if unreliable {
                    return .success((session.peer, id, session.sendUnreliable(.message(id: id, body: body))))
                }
                session.send([.message(id: id, body: body)])
                return .success((session.peer, id, true))
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Ends the session with a peer (both ends see it closed). A paired peer is not
    /// redialled until the node restarts or it connects again.
    public func disconnect(peer peerText: String) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            do throws(EngineError) {
                let session = try liveSession(for: peerText)
                redials[session.deviceKey] = nil
                discovery?.holdOff(session.deviceKey)
                session.closeReason = "disconnected by the user"
                session.redialAllowed = false
                perform(session.machine.handle(.localDisconnect), on: session)
                return .success(session.peer)
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Connects to a paired peer now, undoing `disconnect`: discovery may dial it again, and
    /// its stored address is dialled at once. Returns once connected (or throws why not).
    public func connect(peer peerText: String) throws(EngineError) -> PeerRef {
        let target: Result<(String, PeerRef), EngineError> = queue.sync {
            do {
                let record = try pairedPeer(for: peerText)
                discovery?.release(record.deviceID)
                return .success((record.deviceID, try peerRef(record)))
            } catch {
                return .failure(.wrapping(error))
            }
        }
        let (_, peer) = try target.get()
        try ensureConnected(peer.id.description)
        return peer
    }

    /// Lets a paired peer's offers be accepted without asking (into the receive folder), or not.
    public func setAutoAccept(peer peerText: String, _ on: Bool) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            do {
                var record = try pairedPeer(for: peerText)
                record.autoAccept = on
                try index.upsertPeer(record)
                return .success(try peerRef(record))
            } catch {
                return .failure(.wrapping(error))
            }
        }
        return try result.get()
    }

    /// Forgets a paired peer: removes its pinned key and ends its session.
    public func unpair(peer peerText: String) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            do {
                let record = try pairedPeer(for: peerText)
                _ = try index.deletePeer(deviceID: record.deviceID)
                redials[record.deviceID] = nil
                let peer = try peerRef(record)
                for session in sessions.values where session.deviceKey == record.deviceID {
                    session.closeReason = "unpaired"
                    session.redialAllowed = false
                    perform(session.machine.handle(.localUnpair), on: session)
                }
                return .success(peer)
            } catch {
                return .failure(.wrapping(error))
            }
        }
        return try result.get()
    }

    /// Paired peers and live sessions, merged: one entry per device.
    public func peers() -> [PeerSummary] {
        queue.sync {
            var entries: [String: PeerSummary] = [:]
            let records = (try? index.peers()) ?? []
            for record in records where record.trust == .paired {
                guard let peer = try? peerRef(record) else { continue }
                entries[record.deviceID] = PeerSummary(peer: peer, paired: true, state: .notConnected, addresses: record.addresses,
                                                       lastSeen: record.lastSeen, discovered: false)
            }
            for session in sessions.values where session.machine.state != .closed {
                var entry = entries[session.deviceKey]
                    ?? PeerSummary(peer: session.peer, paired: false, state: .notConnected, addresses: [], discovered: false)
                entry.state = Self.publicState(session.machine.state)
                entry.address = session.channel.remoteDescription
                entries[session.deviceKey] = entry
            }
            mergeDiscovered(into: &entries)
            return entries.values.sorted { $0.peer.name < $1.peer.name }
        }
    }

    /// Facts about this node for `status`.
    public func status() -> NodeStatus {
        queue.sync {
            NodeStatus(id: identity.deviceID, name: identity.displayName,
                       listen: HostPort(host: listenHost, port: listenPort).description,
                       pid: Int(getpid()), sessions: sessions.count, discovery: discoveryStatus())
        }
    }

    /// The Multipeer-style state names: notConnected, connecting, connected.
    static func publicState(_ state: SessionMachine.State) -> SessionState {
        switch state {
        case .awaitingLocalDecision, .awaitingPeerDecision: return .connecting
        case .connected: return .connected
        case .closed: return .notConnected
        }
    }

    // MARK: - Dialling and accepting

    /// Starts dialling from any thread (the work happens on `queue` and a dial thread).
    private func dial(address: String, expected: String?, context: String?,
                      progress: (@Sendable (NodeEvent) -> Void)? = nil,
                      completion: (@Sendable (Result<PeerRef, EngineError>) -> Void)?) {
        queue.async { [self] in
            startDial(address: address, expected: expected, context: context, progress: progress, completion: completion)
        }
    }

    /// Runs on `queue`.
    func startDial(address: String, expected: String?, context: String?,
                           progress: (@Sendable (NodeEvent) -> Void)?,
                           completion: (@Sendable (Result<PeerRef, EngineError>) -> Void)?) {
        let target: HostPort
        do { target = try HostPort(parsing: address) } catch {
            completion?(.failure(.invalidArgument(error.description)))
            return
        }
        if stopped || dialsInFlight.contains(address) {
            completion?(.failure(.network("already connecting to \(address)")))
            return
        }
        dialsInFlight.insert(address)
        let hello = makeHello(context: context, port: listenPort)
        let thread = Thread { [self] in
            let outcome: Result<SecureChannel, NetError>
            do throws(NetError) {
                let stream = try TCPConnection.connect(to: target, timeout: .seconds(5))
                stream.setSendTimeout(config.sendTimeout)
                outcome = .success(try SecureChannel.initiate(over: stream, staticKey: identity.keyPair, hello: hello,
                                                              timeout: config.handshakeTimeout, rekeyInterval: config.rekeyInterval))
            } catch {
                outcome = .failure(error)
            }
            queue.async { [self] in
                dialsInFlight.remove(address)
                switch outcome {
                case let .failure(error):
                    emitError(nil, "cannot connect to \(address): \(error.description)")
                    completion?(.failure(.connection("cannot connect to \(address)", error)))
                case let .success(channel):
                    let session = register(channel, role: .initiator, dialAddress: address)
                    session.pairCompletion = completion
                    session.pairProgress = progress
                    begin(session, standing: standing(of: channel, expected: expected, address: address))
                }
            }
        }
        thread.name = "syncpeer-dial"
        thread.start()
    }

    private func acceptLoop(_ listener: TCPListener) {
        while true {
            let stream: TCPConnection
            do { stream = try listener.accept() } catch {
                let done = queue.sync { stopped }
                if done { return }
                if case .closed = error { return }
                continue
            }
            let source = SourceSlots<TCPConnection>.sourceKey(stream.remoteHost)
            let slot = nextHandshakeID.add(1, ordering: .relaxed).oldValue
            switch pendingHandshakes.withLock({ $0.admit(id: slot, source: source, holder: stream) }) {
            case .admitted:
                break
            case let .admittedEvicting(oldest):
                oldest.close()  // its handshake thread fails and ends
            case let .refused(why):
                stream.close()
                queue.async { [self] in connectionRefused(from: source, "handshakes in progress: \(why)") }
                continue
            }
            stream.setSendTimeout(config.sendTimeout)
            let hello = makeHello(context: nil, port: queue.sync { listenPort })
            let thread = Thread { [self] in
                defer { pendingHandshakes.withLock { $0.release(id: slot) } }
                do throws(NetError) {
                    let channel = try SecureChannel.respond(over: stream, staticKey: identity.keyPair, hello: hello,
                                                            timeout: config.handshakeTimeout, rekeyInterval: config.rekeyInterval)
                    let dialBack = channel.remoteHello.listenPort.map {
                        HostPort(host: stream.remoteHost, port: $0).description
                    }
                    queue.async { [self] in
                        if stopped { channel.close(); return }
                        let session = register(channel, role: .responder, dialAddress: dialBack)
                        session.source = source
                        begin(session, standing: standing(of: channel, expected: nil, address: nil))
                    }
                } catch {
                    stream.close()
                    queue.async { [self] in
                        emitError(nil, "handshake with \(stream.remoteDescription) failed: \(error.description)")
                    }
                }
            }
            thread.name = "syncpeer-handshake"
            thread.start()
        }
    }

    private func makeHello(context: String?, port: UInt16) -> Hello {
        Hello(displayName: identity.displayName, softwareVersion: SyncEngine.version,
              features: ["messages", Self.streamsFeature], context: context, listenPort: port == 0 ? nil : port)
    }

    /// How much the node trusts the peer of a fresh channel.
    private func standing(of channel: SecureChannel, expected: String?, address: String?) -> SessionMachine.PeerStanding {
        let device = channel.remoteDeviceID.compact
        if let expected, expected != device {
            return .impersonation("expected \(displayID(expected).prefix(7)) at \(address ?? "?"), but \(channel.remoteDeviceID.shortID) answered with another key")
        }
        let records = (try? index.peers()) ?? []
        if let record = records.first(where: { $0.deviceID == device }), record.trust == .paired {
            return .paired
        }
        let name = channel.remoteHello.displayName
        // Compare names as people read them: case, surrounding spaces and compatibility forms
        // ("Ａlice", "alice ") do not make a different name.
        if let twin = records.first(where: { $0.trust == .paired && Self.sameName($0.name, name) && $0.deviceID != device }) {
            return .impersonation("'\(name)' is paired as \(displayID(twin.deviceID).prefix(7)) but presents a different key (\(channel.remoteDeviceID.shortID))")
        }
        return .unknown
    }

    // MARK: - Sessions

    private func register(_ channel: SecureChannel, role: SessionMachine.Role, dialAddress: String?) -> Session {
        let session = Session(id: nextSessionID, channel: channel, role: role, dialAddress: dialAddress)
        nextSessionID += 1
        sessions[session.id] = session
        return session
    }

    private func begin(_ session: Session, standing: SessionMachine.PeerStanding) {
        // One session per device: when two exist (both dialled at once), keep the one
        // dialled by the smaller device ID, so both ends keep the same one.
        if standing == .paired,
           let other = sessions.values.first(where: { $0.id != session.id && $0.deviceKey == session.deviceKey && $0.machine.state != .closed }) {
            let myKey = identity.deviceID.compact
            func initiatorKey(_ s: Session) -> String { s.machine.role == .initiator ? myKey : s.deviceKey }
            let keepNew = initiatorKey(session) < initiatorKey(other)
            let loser = keepNew ? other : session
            if !keepNew || other.machine.state != .connected {
                loser.closeReason = "duplicate connection"
                loser.redialAllowed = false
                loser.pairCompletion = nil
                if loser === session {
                    session.send([.close(code: .normal, reason: "duplicate connection")])
                    sessions[session.id] = nil
                    session.closeAfterPendingSends()
                    return
                }
                perform(loser.machine.handle(.localDisconnect), on: loser)
            }
        }
        if standing == .unknown, let source = session.source {
            guard admitUnpaired(session, from: source) else { return }
            // Until the user accepts it, an unknown peer has nothing large to say.
            session.channel.limitFrames(to: Self.maxUnpairedFrameBody)
        }
        redials[session.deviceKey] = nil
        discovery?.release(session.deviceKey)
        emit(.state(.init(peer: session.peer, state: .connecting, address: session.channel.remoteDescription, time: now())))
        perform(session.machine.handle(.handshakeCompleted(standing)), on: session)
        startReader(session)
    }

    /// Reads the peer's frames and hands them to `queue`; pauses while the session's flow
    /// says we hold too much for this peer (back-pressure, see `SessionFlow`).
    private func startReader(_ session: Session) {
        let channel = session.channel
        let flow = session.flow
        let id = session.id
        let thread = Thread { [self] in
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
                        guard let session = sessions[id] else { return }
                        session.lastReceived = .now
                        perform(session.machine.handle(.frame(frame)), on: session)
                    }
                } catch {
                    channel.close()
                    queue.async { [self] in transportEnded(id, error.description) }
                    return
                }
            }
        }
        thread.name = "syncpeer-reader"
        thread.start()
    }

    private func transportEnded(_ id: UInt64, _ reason: String) {
        guard let session = sessions[id] else { return }
        perform(session.machine.handle(.transportClosed(session.closeReason ?? reason)), on: session)
    }

    /// Carries out a state machine's actions.
    func perform(_ actions: [SessionMachine.Action], on session: Session) {
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
                    unpairedSessions.release(id: session.id)
                    markSeen(session)
                    session.pairCompletion?(.success(session.peer))
                    session.pairCompletion = nil
                    folders.sessionConnected(session.link)
                    transfers.sessionConnected(session.link)
                }
                emit(.state(.init(peer: session.peer, state: Self.publicState(state), time: now())))
            case .raiseInvitation:
                let invitation = Self.newInvitationID()
                session.invitationID = invitation
                session.invitationDeadline = .now + config.invitationTimeout
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
            case let .deliverMessage(id, body):
                events.deliverMessage(from: session.peer, body: body)
                emit(.message(.init(peer: session.peer, id: id, text: String(decoding: body, as: UTF8.self), time: now())))
            case let .transfer(frame):
                let link = session.link
                if !transfers.frameReceived(frame, from: link) { _ = folders.frameReceived(frame, from: link) }
            case let .stream(frame):
                if !performStream(session.streams.received(frame), on: session) { return }
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
                // A peer that shuts down may come back: keep redialling. One that ended the
                // session on purpose (disconnect, refusal) is left alone.
                if code != .shuttingDown {
                    session.redialAllowed = false
                    discovery?.holdOff(session.deviceKey)
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

    /// The peer removed its pairing with us and will refuse us: we drop ours too (our
    /// `peers` would otherwise list a paired peer that can never connect), with the reason
    /// on the session's end.
    private func peerUnpairedUs(_ session: Session) {
        guard let record = try? index.peer(deviceID: session.deviceKey), record.trust == .paired else { return }
        session.closeReason = "\(session.peer.name) unpaired this device (pair again to reconnect)"
        redials[session.deviceKey] = nil
        do { _ = try index.deletePeer(deviceID: session.deviceKey) } catch {
            emitError(session.peer, "\(session.peer.name) unpaired this device, but its pairing cannot be removed here: \(error.description)")
        }
    }

    /// Removes a closed session, reports it, and plans a redial for a paired peer.
    private func finish(_ session: Session) {
        guard sessions.removeValue(forKey: session.id) != nil else { return }
        unpairedSessions.release(id: session.id)
        session.flow.cancel()
        session.closeAfterPendingSends()
        folders.sessionClosed(session.link)
        transfers.sessionClosed(session.link)
        let reason = session.closeReason ?? "closed"
        _ = performStream(session.streams.sessionEnded("the session with \(session.peer.name) ended: \(reason)"), on: session)
        emit(.state(.init(peer: session.peer, state: .notConnected, reason: reason, time: now())))
        session.pairCompletion?(.failure(.network("session with \(session.peer.name) ended: \(reason)")))
        session.pairCompletion = nil
        if !stopped, session.redialAllowed, let record = try? index.peer(deviceID: session.deviceKey), record.trust == .paired,
           let stored = record.addresses.first ?? discovery?.peers(device: session.deviceKey).first?.addresses.first,
           !sessions.values.contains(where: { $0.deviceKey == session.deviceKey }) {
            let address = redialAddress(for: session.deviceKey, attempt: 0, fallback: stored)
            redials[session.deviceKey] = Redial(address: address, nextAttempt: .now + config.redialInitial, delay: config.redialInitial)
        }
    }

    private func pin(_ session: Session) {
        let time = now()
        let existing = try? index.peer(deviceID: session.deviceKey)
        var addresses = existing?.addresses ?? []
        if let address = session.dialAddress {
            addresses.removeAll { $0 == address }
            addresses.insert(address, at: 0)
        }
        let record = PeerRecord(deviceID: session.deviceKey, name: session.peer.name, publicKey: session.publicKey.bytes,
                                trust: .paired, firstSeen: existing?.firstSeen ?? time, lastSeen: time,
                                pairedAt: existing?.pairedAt ?? time, addresses: addresses)
        do {
            try index.upsertPeer(record)
            emit(.paired(.init(peer: session.peer, code: session.channel.shortAuthenticationString, time: now())))
        } catch {
            emitError(session.peer, "cannot store the pairing: \(error)")
        }
    }

    private func markSeen(_ session: Session) {
        do { try index.updateLastSeen(deviceID: session.deviceKey, address: session.dialAddress) } catch {
            emitError(session.peer, "cannot record when \(session.peer.name) was last seen: \(error.description)")
        }
    }

    // MARK: - Timer: keepalive, dead peers, invitations, redial

    private func tick() {
        if stopped { return }
        expireUnclaimedStreams()
        let machine = TimerMachine(deadPeerTimeout: config.deadPeerTimeout, keepaliveInterval: config.keepaliveInterval,
                                   redialMaximum: config.redialMaximum)
        let facts = sessions.values.sorted { $0.id < $1.id }.map { session in
            // A peer that does not read what we send: the reader stopped reading it (its
            // silence is then ours), or a write failed or timed out.
            TimerMachine.SessionFacts(id: session.id, awaitingDecision: session.machine.state == .awaitingLocalDecision,
                                      invitationDeadline: session.invitationDeadline,
                                      stall: session.flow.stallReason(pausedFor: config.deadPeerTimeout),
                                      lastReceived: session.lastReceived, lastSent: session.lastSent,
                                      flowPaused: session.flow.isPaused)
        }
        let actions = machine.tick(now: .now, sessions: facts, redials: redials,
                                   devicesWithSession: Set(sessions.values.map(\.deviceKey)))
        for action in actions {
            switch action {
            case let .expireInvitation(id):
                guard let session = sessions[id] else { continue }
                session.invitationDeadline = nil
                session.closeReason = "invitation expired"
                emit(.invitationClosed(.init(peer: session.peer, invitation: session.invitationID, outcome: "expired", time: now())))
                perform(session.machine.handle(.invitationExpired), on: session)
            case let .close(id, reason):
                guard let session = sessions[id] else { continue }
                session.closeReason = session.closeReason ?? reason
                perform(session.machine.handle(.transportClosed(reason)), on: session)
                session.channel.close()
            case let .ping(id):
                sessions[id]?.send([.ping(UInt64.random(in: 0...UInt64.max))])
            case let .dropRedial(device):
                redials[device] = nil
            case let .redial(device, attempt, next):
                redials[device] = next
                let address = redialAddress(for: device, attempt: attempt, fallback: next.address)
                startDial(address: address, expected: device, context: nil, progress: nil, completion: nil)
            }
        }
    }

    private func scheduleInitialRedials() {
        let records = (try? index.peers()) ?? []
        for record in records where record.trust == .paired {
            if let address = record.addresses.first {
                redials[record.deviceID] = Redial(address: address, nextAttempt: .now, delay: config.redialInitial)
            }
        }
        for address in config.staticPeers where !records.contains(where: { $0.addresses.first == address }) {
            startDial(address: address, expected: nil, context: nil, progress: nil, completion: nil)
        }
    }

    // MARK: - Lookup and events

    private func candidates() -> [PeerResolver.Candidate] {
        var list: [PeerResolver.Candidate] = []
        var seen: Set<String> = []
        for record in (try? index.peers()) ?? [] where record.trust == .paired {
            list.append(.init(deviceID: displayID(record.deviceID), name: record.name, addresses: record.addresses))
            seen.insert(record.deviceID)
        }
        for session in sessions.values where !seen.contains(session.deviceKey) {
            list.append(.init(deviceID: session.peer.id.description, name: session.peer.name, addresses: session.dialAddress.map { [$0] } ?? []))
            seen.insert(session.deviceKey)
        }
        return list
    }

    func resolve(_ text: String) throws(EngineError) -> PeerResolver.Candidate {
        do throws(PeerResolver.Failure) {
            switch try PeerResolver.resolve(text, among: candidates(), nearby: nearbyUnpairedNames()) {
            case let .peer(candidate): return candidate
            case let .address(address): throw PeerResolver.Failure.unknown(address)
            }
        } catch {
            throw .notFound(error.description)
        }
    }

    private func liveSession(for text: String) throws(EngineError) -> Session {
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
        try peerRef(device: record.deviceID, name: record.name)
    }

    func peerRef(device compact: String, name: String) throws(EngineError) -> PeerRef {
        try PeerRef.indexed(device: compact, name: name, index: index)
    }

    func emit(_ event: NodeEvent) {
        events.emit(event)
    }

    static func sameName(_ a: String, _ b: String) -> Bool {
        func fold(_ s: String) -> String {
            s.precomposedStringWithCompatibilityMapping.lowercased().trimmingCharacters(in: .whitespaces)
        }
        return fold(a) == fold(b)
    }

    static func newInvitationID() -> String {
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        return String((0..<6).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] })
    }
}

/// A flag set once, from any thread (a dial's end, a finished control request).
final class Latch: Sendable {
    private let state = Mutex(false)
    var isSet: Bool { state.withLock { $0 } }
    /// Sets it; true for the call that set it first.
    @discardableResult
    func set() -> Bool {
        state.withLock { state in
            defer { state = true }
            return !state
        }
    }
}
