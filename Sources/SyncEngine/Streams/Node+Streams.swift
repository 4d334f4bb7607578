internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// Named byte streams between connected peers: the node's side of `StreamTable`.
///
/// A stream a peer opens goes to a consumer waiting in `acceptStream`; else, from a peer
/// whose offers are accepted without asking, into a file in the receive folder
/// (Node+StreamToFile); else it waits, unclaimed, for a consumer for at most the invitation
/// timeout, holding at most `StreamTable.window` bytes meanwhile (the credit it was
/// granted), and is then reset, "nobody is receiving streams".
extension Node {
    /// The Hello feature that says a node speaks streams (frames 0x30–0x34).
    static let streamsFeature = "streams"

    // MARK: - Requests (any thread)

    /// Opens the stream `name` to a connected, paired peer.
    package func openStream(named name: String, to peerText: String) throws(EngineError) -> OutgoingByteStream {
        do throws(WireError) { try Frame.streamOpen(id: 0, name: name).validate() } catch {
            throw .invalidArgument("stream name: \(error)")
        }
        let result: Result<OutgoingByteStream, EngineError> = queue.sync {
            do throws(EngineError) {
                let session = try connectedSession(for: peerText)
                guard session.channel.remoteHello.features.contains(Self.streamsFeature) else {
                    throw EngineError.refused("\(session.peer.name) does not speak streams (an older syncpeer?)")
                }
                guard let (id, actions) = session.streams.open(name: name) else {
                    throw EngineError.refused("\(StreamTable.maxOutgoing) streams to \(session.peer.name) are open already")
                }
                let sessionID = session.id
                let stream = OutgoingByteStream(
                    name: name, peer: session.peer, id: id,
                    sendPiece: { [self] bytes throws(EngineError) in try sendStreamPiece(bytes, stream: id, session: sessionID) },
                    close: { [self] reset in queue.async { [self] in closeOutgoing(id, session: sessionID, reset: reset) } })
                session.outgoingStreams[id] = stream
                _ = performStream(actions, on: session)
                return .success(stream)
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Waits for the next stream a peer opens (from `peerText` only, when given) and takes
    /// it; a stream already waiting is taken at once. Nil when none came within `timeout`.
    /// Blocks the calling thread (never call it on `queue`).
    package func acceptStream(from peerText: String? = nil, timeout: Duration? = nil) throws(EngineError) -> IncomingByteStream? {
        let box = Mutex<IncomingByteStream?>(nil)
        let arrived = DispatchSemaphore(value: 0)
        let waiterID = try awaitStream(from: peerText) { stream in
            box.withLock { $0 = stream }
            arrived.signal()
        }
        let deadline: DispatchTime = timeout.map { .now() + .nanoseconds(Int(clamping: $0.components.seconds * 1_000_000_000 + $0.components.attoseconds / 1_000_000_000)) } ?? .distantFuture
        if arrived.wait(timeout: deadline) == .timedOut {
            queue.sync { streamWaiters.removeAll { $0.id == waiterID } }
            // Delivered between the timeout and the removal: keep it.
            return box.withLock { $0 }
        }
        return box.withLock { $0 }!
    }

    /// Hands the next stream a peer opens (from `peerText` only, when given) to `deliver`,
    /// without waiting for it: a stream already waiting goes at once, a later one on the
    /// node's queue. Returns the waiter's ID for `withdrawStreamWaiter`.
    package func awaitStream(from peerText: String? = nil,
                            deliver: @escaping @Sendable (IncomingByteStream) -> Void) throws(EngineError) -> UInt64 {
        let registered: Result<UInt64, EngineError> = queue.sync {
            var device: String?
            if let peerText {
                do throws(EngineError) { device = try resolve(peerText).deviceID.filter { $0 != "-" } } catch { return .failure(error) }
            }
            let waiter = StreamWaiter(id: nextStreamWaiterID(), device: device, deliver: deliver)
            if let index = unclaimedStreams.firstIndex(where: { device == nil || $0.stream.peerKey == device }) {
                let pending = unclaimedStreams.remove(at: index)
                waiter.deliver(pending.stream)
            } else {
                streamWaiters.append(waiter)
            }
            return .success(waiter.id)
        }
        return try registered.get()
    }

    /// Withdraws a waiter of `awaitStream`; `done` learns (on the node's queue) whether it was
    /// still waiting: false means its `deliver` ran already.
    package func withdrawStreamWaiter(_ id: UInt64, done: @escaping @Sendable (Bool) -> Void) {
        queue.async { [self] in
            let waiting = streamWaiters.contains { $0.id == id }
            streamWaiters.removeAll { $0.id == id }
            done(waiting)
        }
    }

    // MARK: - On the queue

    /// Carries out a stream table's actions; false when the session ended (a violation).
    @discardableResult
    func performStream(_ actions: [StreamTable.Action], on session: Session) -> Bool {
        for action in actions {
            switch action {
            case let .send(frame):
                if connections.sessions[session.id] != nil { session.send([frame]) }
            case let .opened(id, name):
                let sessionID = session.id
                let stream = IncomingByteStream(
                    name: name, peer: session.peer, id: id, sessionID: sessionID,
                    consumed: { [self] bytes in queue.async { [self] in streamConsumed(bytes, stream: id, session: sessionID) } },
                    reset: { [self] reason in queue.async { [self] in closeIncoming(id, session: sessionID, reason: reason) } })
                session.incomingStreams[id] = stream
                handOut(stream, from: session)
            case let .data(id, bytes):
                session.incomingStreams[id]?.append(bytes)
            case let .finished(id):
                session.incomingStreams.removeValue(forKey: id)?.ended(.complete)
            case let .cut(id, reason):
                session.incomingStreams.removeValue(forKey: id)?.ended(.cut(reason))
                session.outgoingStreams.removeValue(forKey: id)?.ended(reason)
                unclaimedStreams.removeAll { $0.stream.sessionID == session.id && $0.stream.id == id }
            case let .credit(id, _):
                session.outgoingStreams[id]?.creditArrived()
            case let .violation(reason):
                guard connections.sessions[session.id] != nil else { return false }
                connections.endForViolation(session, reason)
                return false
            }
        }
        return true
    }

    /// Gives a stream the peer opened to a waiting consumer, else saves it as a file (a peer
    /// whose offers we accept without asking), else keeps it unclaimed for a while.
    private func handOut(_ stream: IncomingByteStream, from session: Session) {
        let key = stream.peerKey
        if let index = streamWaiters.firstIndex(where: { $0.device == nil || $0.device == key }) {
            streamWaiters.remove(at: index).deliver(stream)
        } else if savesStreamsWithoutAsking(session) {
            saveToReceiveFolder(stream)
        } else {
            unclaimedStreams.append(UnclaimedStream(stream: stream, deadline: .now + config.invitationTimeout))
        }
    }

    /// Resets the streams nobody took in time (from the timer).
    func expireUnclaimedStreams() {
        let now = ContinuousClock.now
        let expired = unclaimedStreams.filter { $0.deadline <= now }
        guard !expired.isEmpty else { return }
        unclaimedStreams.removeAll { $0.deadline <= now }
        for pending in expired {
            pending.stream.ended(.cut("nobody took the stream"))
            closeIncoming(pending.stream.id, session: pending.stream.sessionID, reason: "nobody is receiving streams")
        }
    }

    private func sendStreamPiece(_ bytes: UnsafeRawBufferPointer, stream id: UInt32, session sessionID: UInt64) throws(EngineError) -> Int {
        let result: Result<Int, EngineError> = queue.sync {
            guard let session = connections.sessions[sessionID], session.outgoingStreams[id] != nil else {
                return .failure(.streamCut("the session ended"))
            }
            let granted = session.streams.take(credit: bytes.count, for: id)
            if granted > 0 {
                session.send([.streamData(id: id, bytes: Array(UnsafeRawBufferPointer(rebasing: bytes[0..<granted])))])
            }
            return .success(granted)
        }
        return try result.get()
    }

    private func closeOutgoing(_ id: UInt32, session sessionID: UInt64, reset: String?) {
        guard let session = connections.sessions[sessionID] else { return }
        session.outgoingStreams[id] = nil
        if let reset {
            performStream(session.streams.reset(id, reason: reset), on: session)
        } else {
            performStream(session.streams.finish(id), on: session)
        }
    }

    private func closeIncoming(_ id: UInt32, session sessionID: UInt64, reason: String) {
        guard let session = connections.sessions[sessionID] else { return }
        session.incomingStreams[id] = nil
        unclaimedStreams.removeAll { $0.stream.sessionID == sessionID && $0.stream.id == id }
        performStream(session.streams.reset(id, reason: reason), on: session)
    }

    private func streamConsumed(_ bytes: Int, stream id: UInt32, session sessionID: UInt64) {
        guard let session = connections.sessions[sessionID] else { return }
        performStream(session.streams.consumed(bytes, of: id), on: session)
    }
}

/// A consumer waiting in `Node.acceptStream`.
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
