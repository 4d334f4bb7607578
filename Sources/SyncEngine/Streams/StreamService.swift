internal import Dispatch
internal import PeerCrypto
internal import PeerWire
internal import Synchronization

/// Named byte streams between connected peers: every session's `StreamTable` and the local
/// ends of its streams, the streams peers opened that no consumer took yet, and the
/// consumers waiting for one. Its state is behind one `Mutex` (checked `Sendable`); the
/// node's queue orders what happens to it (the node hands it sessions and stream frames,
/// as `SessionObserver` hears them), and it reaches the sessions only through `PeerLink`.
///
/// A stream a peer opens goes to a consumer waiting in `awaitStream`; else, from a peer
/// whose offers are accepted without asking, into a file in the receive folder
/// (StreamService+ToFile); else it waits, unclaimed, for a consumer for at most the
/// invitation timeout, holding at most `StreamTable.window` bytes meanwhile (the credit it
/// was granted), and is then reset, "nobody is receiving streams".
final class StreamService: Reporting, Sendable {
    /// The Hello feature that says a node speaks streams (frames 0x30–0x34).
    static let feature = "streams"

    let queue: DispatchQueue
    let link: any PeerLink
    /// The peer rows (whose streams are saved without asking).
    let store: any TransferStore
    let events: any EventSink
    let config: NodeConfig
    private let state: Mutex<State>

    struct State {
        var sessions: [UInt64: SessionStreams] = [:]
        /// Streams peers opened that no consumer took yet, oldest first.
        var unclaimed: [UnclaimedStream] = []
        /// Consumers waiting for a stream, first come first served.
        var waiters: [StreamWaiter] = []
        var lastWaiterID: UInt64 = 0
        /// Where streams saved without asking go (`receive-dir` changes it).
        var receiveDirectory: String
    }

    /// One connected session's streams.
    struct SessionStreams {
        var table: StreamTable
        let peer: PeerRef
        let deviceKey: String
        var incoming: [UInt32: IncomingByteStream] = [:]
        var outgoing: [UInt32: OutgoingByteStream] = [:]
    }

    init(queue: DispatchQueue, link: any PeerLink, store: any TransferStore, events: any EventSink, config: NodeConfig) {
        self.queue = queue
        self.link = link
        self.store = store
        self.events = events
        self.config = config
        state = Mutex(State(receiveDirectory: config.receiveDirectory))
    }

    func emit(_ event: NodeEvent) {
        events.emit(event)
    }

    var receiveDirectory: String {
        get { state.withLock { $0.receiveDirectory } }
        set { state.withLock { $0.receiveDirectory = newValue } }
    }

    // MARK: - Sessions (on the queue)

    /// A session is connected: its streams may open from now on.
    func sessionConnected(_ session: LinkSession, isInitiator: Bool) {
        dispatchPrecondition(condition: .onQueue(queue))
        state.withLock {
            $0.sessions[session.id] = SessionStreams(table: StreamTable(isInitiator: isInitiator), peer: session.peer,
                                                     deviceKey: session.deviceKey)
        }
    }

    /// A stream frame from a connected session; the violation when it breaks the stream
    /// rules (the caller ends the session, and drops what follows).
    func frameReceived(_ frame: Frame, on sessionID: UInt64) -> String? {
        dispatchPrecondition(condition: .onQueue(queue))
        let steps = state.withLock { state -> [Step] in
            guard let actions = state.sessions[sessionID]?.table.received(frame) else { return [] }
            return apply(actions, session: sessionID, to: &state)
        }
        return perform(steps, on: sessionID)
    }

    /// The session ended: its streams are cut (their readers and writers see why).
    func sessionClosed(_ sessionID: UInt64, reason: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        let steps = state.withLock { state -> [Step] in
            guard let actions = state.sessions[sessionID]?.table.sessionEnded(reason) else { return [] }
            let steps = apply(actions, session: sessionID, to: &state)
            state.sessions[sessionID] = nil
            return steps
        }
        _ = perform(steps, on: sessionID)
    }

    /// Resets the streams nobody took in time (from the connections' timer).
    func timerFired() {
        dispatchPrecondition(condition: .onQueue(queue))
        let now = ContinuousClock.now
        let expired = state.withLock { state -> [UnclaimedStream] in
            let expired = state.unclaimed.filter { $0.deadline <= now }
            if !expired.isEmpty { state.unclaimed.removeAll { $0.deadline <= now } }
            return expired
        }
        for pending in expired {
            pending.stream.ended(.cut("nobody took the stream"))
            closeIncoming(pending.stream.id, session: pending.stream.sessionID, reason: "nobody is receiving streams")
        }
    }

    // MARK: - Requests (on the queue)

    /// Opens the stream `name` on a connected session whose peer speaks streams.
    func open(named name: String, on session: LinkSession) throws(EngineError) -> OutgoingByteStream {
        dispatchPrecondition(condition: .onQueue(queue))
        let sessionID = session.id
        let opened = state.withLock { state -> Result<(OutgoingByteStream, [Step]), EngineError> in
            guard state.sessions[sessionID] != nil else { return .failure(.streamCut("the session ended")) }
            guard let (id, actions) = state.sessions[sessionID]!.table.open(name: name) else {
                return .failure(.refused("\(StreamTable.maxOutgoing) streams to \(session.peer.name) are open already"))
            }
            let stream = OutgoingByteStream(
                name: name, peer: session.peer, id: id,
                sendPiece: { [self] bytes throws(EngineError) in try sendPiece(bytes, stream: id, session: sessionID) },
                close: { [self] reset in queue.async { [self] in closeOutgoing(id, session: sessionID, reset: reset) } })
            state.sessions[sessionID]!.outgoing[id] = stream
            return .success((stream, apply(actions, session: sessionID, to: &state)))
        }
        let (stream, steps) = try opened.get()
        _ = perform(steps, on: sessionID)
        return stream
    }

    /// Registers a consumer for the next stream a peer opens (from `device` only, when
    /// given): a stream already waiting goes to `deliver` at once. Returns the waiter's ID.
    func awaitStream(from device: String?, deliver: @escaping @Sendable (IncomingByteStream) -> Void) -> UInt64 {
        dispatchPrecondition(condition: .onQueue(queue))
        let (id, waiting) = state.withLock { state -> (UInt64, IncomingByteStream?) in
            state.lastWaiterID += 1
            let id = state.lastWaiterID
            if let index = state.unclaimed.firstIndex(where: { device == nil || $0.stream.peerKey == device }) {
                return (id, state.unclaimed.remove(at: index).stream)
            }
            state.waiters.append(StreamWaiter(id: id, device: device, deliver: deliver))
            return (id, nil)
        }
        if let waiting { deliver(waiting) }
        return id
    }

    /// Withdraws a waiter; false when it was no longer waiting (its `deliver` ran already).
    @discardableResult
    func withdraw(_ id: UInt64) -> Bool {
        state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return false }
            state.waiters.remove(at: index)
            return true
        }
    }

    // MARK: - The stream tables' actions

    /// What a table's actions come to once the state is changed: the calls to make, in
    /// order, with the lock released.
    enum Step: Sendable {
        case send([Frame])
        /// A stream the peer opened, for this waiter (nil: saved or kept unclaimed).
        case handOut(IncomingByteStream, to: StreamWaiter?)
        case data(IncomingByteStream, [UInt8])
        case ended(IncomingByteStream, StreamEnd)
        case cut(IncomingByteStream?, OutgoingByteStream?, String)
        case credit(OutgoingByteStream)
        case violation(String)
    }

    /// Changes the state for a session table's actions (under the lock: pure, no calls out).
    private func apply(_ actions: [StreamTable.Action], session sessionID: UInt64, to state: inout State) -> [Step] {
        var steps: [Step] = []
        for action in actions {
            switch action {
            case let .send(frame):
                steps.append(.send([frame]))
            case let .opened(id, name):
                guard let peer = state.sessions[sessionID]?.peer else { continue }
                let stream = IncomingByteStream(
                    name: name, peer: peer, id: id, sessionID: sessionID,
                    consumed: { [self] bytes in queue.async { [self] in consumed(bytes, stream: id, session: sessionID) } },
                    reset: { [self] reason in queue.async { [self] in closeIncoming(id, session: sessionID, reason: reason) } })
                state.sessions[sessionID]?.incoming[id] = stream
                let key = stream.peerKey
                var waiter: StreamWaiter?
                if let index = state.waiters.firstIndex(where: { $0.device == nil || $0.device == key }) {
                    waiter = state.waiters.remove(at: index)
                }
                steps.append(.handOut(stream, to: waiter))
            case let .data(id, bytes):
                if let stream = state.sessions[sessionID]?.incoming[id] { steps.append(.data(stream, bytes)) }
            case let .finished(id):
                if let stream = state.sessions[sessionID]?.incoming.removeValue(forKey: id) { steps.append(.ended(stream, .complete)) }
            case let .cut(id, reason):
                let incoming = state.sessions[sessionID]?.incoming.removeValue(forKey: id)
                let outgoing = state.sessions[sessionID]?.outgoing.removeValue(forKey: id)
                state.unclaimed.removeAll { $0.stream.sessionID == sessionID && $0.stream.id == id }
                steps.append(.cut(incoming, outgoing, reason))
            case let .credit(id, _):
                if let stream = state.sessions[sessionID]?.outgoing[id] { steps.append(.credit(stream)) }
            case let .violation(reason):
                steps.append(.violation(reason))
                return steps
            }
        }
        return steps
    }

    /// Makes the calls of `steps` in order (the lock released); the violation, if any.
    private func perform(_ steps: [Step], on sessionID: UInt64) -> String? {
        for step in steps {
            switch step {
            case let .send(frames):
                link.send(frames, on: sessionID)
            case let .handOut(stream, waiter):
                if let waiter {
                    waiter.deliver(stream)
                } else if savesWithoutAsking(stream.peerKey) {
                    saveToReceiveFolder(stream)
                } else {
                    let deadline = ContinuousClock.now + config.invitationTimeout
                    state.withLock { $0.unclaimed.append(UnclaimedStream(stream: stream, deadline: deadline)) }
                    // Its own wake: the connections' timer sleeps until its own deadlines.
                    queue.asyncAfter(deadline: .now() + .nanoseconds(Int(config.invitationTimeout / .nanoseconds(1)))) { [weak self] in
                        self?.timerFired()
                    }
                }
            case let .data(stream, bytes):
                stream.append(bytes)
            case let .ended(stream, end):
                stream.ended(end)
            case let .cut(incoming, outgoing, reason):
                incoming?.ended(.cut(reason))
                outgoing?.ended(reason)
            case let .credit(stream):
                stream.creditArrived()
            case let .violation(reason):
                return reason
            }
        }
        return nil
    }

    /// Runs a local call's table change (on the queue) and carries out its actions; nothing
    /// when the session ended.
    private func change(session sessionID: UInt64, _ body: (inout SessionStreams) -> [StreamTable.Action]) {
        let steps = state.withLock { state -> [Step] in
            guard state.sessions[sessionID] != nil else { return [] }
            let actions = body(&state.sessions[sessionID]!)
            return apply(actions, session: sessionID, to: &state)
        }
        _ = perform(steps, on: sessionID)
    }

    // MARK: - From the streams' ends (hopped to the queue)

    /// Sends what the credit allows of `bytes` as one data frame; how many bytes went.
    private func sendPiece(_ bytes: UnsafeRawBufferPointer, stream id: UInt32, session sessionID: UInt64) throws(EngineError) -> Int {
        let result: Result<Int, EngineError> = queue.sync {
            let granted = state.withLock { state -> Int? in
                guard state.sessions[sessionID]?.outgoing[id] != nil else { return nil }
                return state.sessions[sessionID]!.table.take(credit: bytes.count, for: id)
            }
            guard let granted else { return .failure(.streamCut("the session ended")) }
            if granted > 0 {
                link.send([.streamData(id: id, bytes: Array(UnsafeRawBufferPointer(rebasing: bytes[0..<granted])))], on: sessionID)
            }
            return .success(granted)
        }
        return try result.get()
    }

    private func closeOutgoing(_ id: UInt32, session sessionID: UInt64, reset: String?) {
        dispatchPrecondition(condition: .onQueue(queue))
        change(session: sessionID) { streams in
            streams.outgoing[id] = nil
            return reset.map { streams.table.reset(id, reason: $0) } ?? streams.table.finish(id)
        }
    }

    private func closeIncoming(_ id: UInt32, session sessionID: UInt64, reason: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        state.withLock { $0.unclaimed.removeAll { $0.stream.sessionID == sessionID && $0.stream.id == id } }
        change(session: sessionID) { streams in
            streams.incoming[id] = nil
            return streams.table.reset(id, reason: reason)
        }
    }

    private func consumed(_ bytes: Int, stream id: UInt32, session sessionID: UInt64) {
        dispatchPrecondition(condition: .onQueue(queue))
        change(session: sessionID) { $0.table.consumed(bytes, of: id) }
    }
}

/// A consumer waiting in `StreamService.awaitStream`.
struct StreamWaiter: Sendable {
    let id: UInt64
    /// Only streams from this device (compact ID), or any.
    let device: String?
    let deliver: @Sendable (IncomingByteStream) -> Void
}

/// A stream a peer opened that no consumer took yet.
struct UnclaimedStream: Sendable {
    let stream: IncomingByteStream
    let deadline: ContinuousClock.Instant
}

extension IncomingByteStream {
    /// The compact device ID of the writer.
    var peerKey: String { peer.id.compact }
}
