internal import Dispatch
#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerIndex
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// The node: the composition root. It opens the index and the event bus, makes the
/// services and wires them through their roles (Roles.swift), and offers the public calls
/// (the control server's and the Swift API's), which resolve peers' names and hand the rest
/// to a service:
///
///     ConnectionService ── PeerLink ──▶ TransferService, FolderService
///            │   ▲
///            │   └── NearbyPeers ── node over NodeDiscovery (Node+Discovery)
///            └── SessionObserver ──▶ node ──▶ folders, transfers, StreamService
///
/// `queue` (one serial queue for the engine) orders what happens to the services: the
/// connections call the node's `SessionObserver` hooks on it, and the public calls hop to
/// it. The node's own state (discovery) is behind a `Mutex`; the rest is `let`s of
/// `Sendable` types, so the compiler checks it. Each service runs its blocking work on
/// threads or queues of its own.
package final class Node: Reporting, Sendable {
    /// The key pair and device ID, with the display name as it is now (`rename`).
    package var identity: Identity {
        var current = initialIdentity
        current.displayName = displayName.withLock { $0 }
        return current
    }
    private let initialIdentity: Identity
    /// Any thread: the display name (`rename` changes it).
    let displayName: Mutex<String>
    /// Any thread: where accepted files and folders go (`receive-dir` changes it).
    let receiveDirectory: Mutex<String>
    package let home: NodeHome
    package let config: NodeConfig
    let index: NodeIndex
    let queue = DispatchQueue(label: "syncpeer.node")

    /// Who listens to the node's events (its own lock: subscribing never waits for `queue`).
    let events = EventBus()
    /// The last events, for pages that open later (`activity`).
    let activity = ActivityLog()
    /// The listener, dialling, handshakes, sessions, keepalive, redial and pairing.
    let connections: ConnectionService
    /// Sending and receiving files and folders (its state confined to `queue`).
    let transfers: TransferService
    /// Shared folders: sharing, the index exchange, serving blocks (confined to `queue`).
    let folders: FolderService
    /// Named byte streams: every session's stream table, unclaimed streams, waiting consumers.
    let streams: StreamService

    /// What changes in the node itself.
    struct State {
        /// Advertiser, browser and the peers found (nil when discovery is off); see Node+Discovery.
        var discovery: NodeDiscovery?
    }
    let state = Mutex(State())

    /// Discovery as it is now (any thread); nil when it is off or not started.
    var discovery: NodeDiscovery? { state.withLock { $0.discovery } }

    init(home: NodeHome, identity: Identity, index: NodeIndex, config: NodeConfig) {
        self.home = home
        initialIdentity = identity
        displayName = Mutex(identity.displayName)
        receiveDirectory = Mutex(config.receiveDirectory)
        self.index = index
        self.config = config
        connections = ConnectionService(queue: queue, identity: identity, config: config, index: index, events: events,
                                        features: ["messages", StreamService.feature, FolderService.blockDeltaFeature,
                                                   FolderService.indexBlocksFeature, TransferService.streamedManifestFeature,
                                                   TransferService.resentBytesFeature, FolderService.selectionFeature,
                                                   ConnectionService.certificateFeature, FolderService.chunkHaveFeature,
                                                   FolderService.growingFilesFeature])
        transfers = TransferService(queue: queue, store: index, events: events, config: config,
                                    indexedManifest: { [index] path, stamp in Self.indexedManifest(path, stamp, in: index) })
        folders = FolderService(queue: queue, index: index, events: events, config: config, localDevice: identity.deviceID.compact)
        streams = StreamService(queue: queue, link: connections, store: index, events: events, config: config)
        transfers.link = connections
        folders.link = connections
        let folderService = folders
        folders.versions = VersionKeeper(versionsDirectory: home.versionsDirectory, index: index,
                                         report: { [weak folderService] in folderService?.emitError(nil, "versions: " + $0) })
        connections.observer = self
        connections.nearby = self
        _ = events.subscribe { [activity] event in activity.record(event) }
    }

    /// Opens an initialised home (identity and index) for running a node.
    package static func open(home: NodeHome, config: NodeConfig) throws(EngineError) -> Node {
        let identity = try NodeSetup.loadIdentity(home: home)
        let index = try NodeSetup.openIndex(home)
        var config = config
        if !config.receiveDirectoryGiven {
            // Unreadable, the daemon would receive into the default folder, not the chosen one.
            do throws(IndexError) {
                if let chosen = try index.setting(Self.receiveDirectorySetting) { config.receiveDirectory = chosen }
            } catch { throw .index(error) }
        }
        // Before the control socket, any folder or any peer: records of protocol 2's hash.
        try ContentHashUpgrade.run(index: index)
        return Node(home: home, identity: identity, index: index, config: config)
    }

    // MARK: - Lifecycle

    /// Binds the listener and starts accepting, the folders, the timer and redials, and
    /// discovery. Returns "host:port".
    package func start() throws(EngineError) -> String {
        let bound = try connections.listen()
        queue.sync {
            transfers.pruneHistory()
            folders.startFolders()
            folders.startVersionExpiry()
            folders.importKeptFolders(versionsDirectory: home.versionsDirectory)
            connections.startTimer()
        }
        connections.startRelays()
        connections.startAnnouncing()
        do { try startDiscovery(port: bound.port, host: bound.host) } catch {
            stop()
            throw error
        }
        return bound.address
    }

    /// Closes every session (telling peers), the listener and the timer.
    package func stop() {
        stopDiscovery()
        folders.stopFolders()
        connections.stop()
    }

    /// Registers a handler for every event; returns a token for `unsubscribe`. Any thread,
    /// a handler included.
    package func subscribe(_ handler: @escaping @Sendable (NodeEvent) -> Void) -> UInt64 {
        events.subscribe(handler)
    }

    package func unsubscribe(_ token: UInt64) {
        events.unsubscribe(token)
    }

    /// Registers a handler for every message's body as bytes (events carry it as text).
    package func subscribeMessages(_ handler: @escaping @Sendable (PeerRef, [UInt8]) -> Void) -> UInt64 {
        events.subscribeMessages(handler)
    }

    package func unsubscribeMessages(_ token: UInt64) {
        events.unsubscribe(token)
    }

    // MARK: - Connections and pairing (any thread)

    /// Dials HOST:PORT (or a nearby or paired peer by name) and invites the node there.
    /// `completion` runs once: with the peer when the session is connected (the peer
    /// accepted), or with the reason it was not.
    package func pair(address: String, context: String?,
                     progress: @escaping @Sendable (NodeEvent) -> Void = { _ in },
                     completion: @escaping @Sendable (Result<PeerRef, EngineError>) -> Void) {
        if let context, context.utf8.count > WireLimits.maxContext {
            completion(.failure(.invalidArgument("the context is \(context.utf8.count) bytes; at most \(WireLimits.maxContext) are allowed")))
            return
        }
        // A certificate ID (what `syncpeer id` prints second): found through the discovery
        // servers and relays, not on the network (ConnectionService+GlobalPairing).
        if (try? DeviceID(parsing: address)) == nil, let certificate = try? CertificateID(parsing: address) {
            connections.invite(certificate: certificate, context: context, progress: progress, completion: completion)
            return
        }
        queue.async { [self] in
            switch pairTarget(address) {
            case let .success(target):
                connections.invite(address: target.address, expected: target.expected, context: context,
                                   progress: progress, completion: completion)
            case let .failure(error):
                completion(.failure(error))
            }
        }
    }

    /// Makes sure a paired peer is connected: dials its last known address if needed and
    /// waits up to `timeout`. Blocks the calling thread (never call it on `queue`).
    package func ensureConnected(_ peerText: String, timeout: Duration = .seconds(15)) throws(EngineError) {
        try connections.ensureConnected(peerText, timeout: timeout)
    }

    /// Dials `peerText` when it is not connected and waits until that dial ends (connected,
    /// refused, unreachable: a peer on the network answers in milliseconds) or `patience`
    /// passes; never fails for a paired peer that is offline: a send to it is queued and goes
    /// out when it connects (a later redial, its own dial, or discovery).
    package func dialIfOffline(_ peerText: String, patience: Duration = .seconds(3)) throws(EngineError) {
        try connections.dialIfOffline(peerText, patience: patience)
    }

    /// Open invitations from peers.
    package func invitations() -> [InvitationInfo] {
        connections.invitations()
    }

    /// Accepts or declines an open invitation.
    package func answer(invitation: String, accept: Bool) throws(EngineError) -> PeerRef {
        try connections.answer(invitation: invitation, accept: accept)
    }

    /// Sends a text message to a connected, paired peer; returns the peer and message ID.
    package func sendMessage(to peerText: String, text: String) throws(EngineError) -> (PeerRef, UInt64) {
        let (peer, id, _) = try connections.sendMessage(to: peerText, bytes: Array(text.utf8), unreliable: false)
        return (peer, id)
    }

    /// Sends bytes as a message. Reliable: queued in order with every other frame.
    /// Unreliable: never queued behind bulk frames, and dropped (`sent` false) when the
    /// link to the peer is saturated.
    package func sendMessage(to peerText: String, bytes body: [UInt8], unreliable: Bool) throws(EngineError) -> (peer: PeerRef, id: UInt64, sent: Bool) {
        try connections.sendMessage(to: peerText, bytes: body, unreliable: unreliable)
    }

    /// Ends the session with a peer (both ends see it closed). A paired peer is not
    /// redialled until the node restarts or it connects again.
    package func disconnect(peer peerText: String) throws(EngineError) -> PeerRef {
        try connections.disconnect(peer: peerText)
    }

    /// Connects to a paired peer now, undoing `disconnect`: discovery may dial it again, and
    /// its stored address is dialled at once. Returns once connected (or throws why not).
    package func connect(peer peerText: String) throws(EngineError) -> PeerRef {
        try connections.connect(peer: peerText, timeout: .seconds(15))
    }

    /// Lets a paired peer's offers of files (or, with `folders`, of shared folders) be
    /// accepted without asking (into the receive folder), or not.
    package func setAutoAccept(peer peerText: String, _ on: Bool, folders: Bool = false) throws(EngineError) -> PeerRef {
        try connections.setAutoAccept(peer: peerText, on, folders: folders)
    }

    /// Forgets a paired peer: removes its pinned key and ends its session.
    package func unpair(peer peerText: String) throws(EngineError) -> PeerRef {
        try connections.unpair(peer: peerText)
    }

    /// Paired peers, live sessions and discovered peers, merged: one entry per device.
    package func peers() throws(EngineError) -> [PeerSummary] {
        let result: Result<[PeerSummary], EngineError> = queue.sync {
            do throws(EngineError) {
                var entries = try connections.peerEntries()
                mergeDiscovered(into: &entries)
                return .success(entries.values.sorted { $0.peer.name < $1.peer.name })
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Peers with a connected session (from the sessions alone: no index read).
    package func connectedPeers() -> [PeerRef] {
        queue.sync {
            var seen: Set<String> = []
            return connections.sessions.values.filter { $0.machine.state == .connected && seen.insert($0.deviceKey).inserted }
                .map(\.peer).sorted { $0.name < $1.name }
        }
    }

    /// Facts about this node for `status`.
    package func status() -> NodeStatus {
        queue.sync {
            NodeStatus(id: identity.deviceID, name: identity.displayName, receiveDir: receiveDirectory.withLock { $0 },
                       listen: HostPort(host: connections.listenHost, port: connections.listenPort).description,
                       pid: Int(getpid()), sessions: connections.sessions.count, discovery: discoveryStatus(),
                       addresses: ListenAddresses.dialable(host: connections.listenHost, port: connections.listenPort))
        }
    }

    // MARK: - Lookup and events (on the queue)

    func resolve(_ text: String) throws(EngineError) -> PeerResolver.Candidate {
        dispatchPrecondition(condition: .onQueue(queue))
        return try connections.resolve(text)
    }

    func connectedSession(for text: String) throws(EngineError) -> Session {
        dispatchPrecondition(condition: .onQueue(queue))
        return try connections.connectedSession(for: text)
    }

    /// The paired peer `text` names (connected or not).
    func pairedPeer(for text: String) throws(EngineError) -> PeerRecord {
        dispatchPrecondition(condition: .onQueue(queue))
        return try connections.pairedPeer(for: text)
    }

    func peerRef(_ record: PeerRecord) throws(EngineError) -> PeerRef {
        dispatchPrecondition(condition: .onQueue(queue))
        return try connections.peerRef(record)
    }

    func emit(_ event: NodeEvent) {
        events.emit(event)
    }
}

/// The node wires what the connections see to the services above them (on `queue`).
extension Node: SessionObserver {
    func sessionConnected(_ session: Session) {
        dispatchPrecondition(condition: .onQueue(queue))
        let link = session.link
        streams.sessionConnected(link, isInitiator: session.machine.role == .initiator)
        folders.sessionConnected(link)
        transfers.sessionConnected(link)
    }

    func transferFrame(_ frame: Frame, on session: Session) {
        dispatchPrecondition(condition: .onQueue(queue))
        let link = session.link
        if !transfers.frameReceived(frame, from: link) { _ = folders.frameReceived(frame, from: link) }
    }

    /// A violation of the stream rules ends the session (false: drop what follows).
    func streamFrame(_ frame: Frame, on session: Session) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let violation = streams.frameReceived(frame, on: session.id) else { return true }
        guard connections.sessions[session.id] != nil else { return false }
        connections.endForViolation(session, violation)
        return false
    }

    func sessionEnded(_ session: Session, reason: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        folders.sessionClosed(session.link)
        transfers.sessionClosed(session.link, replaced: session.replaced)
        streams.sessionClosed(session.id, reason: "the session with \(session.peer.name) ended: \(reason)")
    }

    func timerFired() {
        dispatchPrecondition(condition: .onQueue(queue))
        streams.timerFired()
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
