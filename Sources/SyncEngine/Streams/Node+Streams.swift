internal import Dispatch
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// Named byte streams as the control server and the Swift API call them: the node resolves
/// the peer's name (and its session) on its queue and hands the rest to `StreamService`.
extension Node {
    // MARK: - Requests (any thread but the queue)

    /// Opens the stream `name` to a connected, paired peer.
    package func openStream(named name: String, to peerText: String) throws(EngineError) -> OutgoingByteStream {
        do throws(WireError) { try Frame.streamOpen(id: 0, name: name).validate() } catch {
            throw .invalidArgument("stream name: \(error)")
        }
        let result: Result<OutgoingByteStream, EngineError> = queue.sync {
            do throws(EngineError) {
                let session = try connectedSession(for: peerText)
                guard session.channel.remoteHello.features.contains(StreamService.feature) else {
                    throw EngineError.refused("\(session.peer.name) does not speak streams (an older syncpeer?)")
                }
                return .success(try streams.open(named: name, on: session.link))
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
            // On the queue: a stream handed to this waiter is delivered before it is withdrawn.
            queue.sync { _ = streams.withdraw(waiterID) }
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
            return .success(streams.awaitStream(from: device, deliver: deliver))
        }
        return try registered.get()
    }

    /// Withdraws a waiter of `awaitStream`; `done` learns (on the node's queue) whether it was
    /// still waiting: false means its `deliver` ran already.
    package func withdrawStreamWaiter(_ id: UInt64, done: @escaping @Sendable (Bool) -> Void) {
        queue.async { [self] in done(streams.withdraw(id)) }
    }
}
