internal import Dispatch
internal import PeerNet
internal import Synchronization

/// Connections over a byte stream made elsewhere: no socket is dialled or accepted here.
/// Whoever carries the bytes (a test's in-memory pair, an embedder's own transport) hands
/// one end to `connect(over:)` on one node and the other end to `accept(over:)` on the
/// other; the handshake, the session and every service above it run as over TCP. Such a
/// session has no address to dial again: when the stream ends, the peer is offline until
/// another stream (or a dial) brings it back.
extension ConnectionService {
    /// The dialler's end: the handshake as initiator on its own thread, then a session as
    /// for `dial` (`expected`: the device key the peer must have, or nil to pair). Any thread.
    func connect(over stream: any ByteStream, expected: String?, context: String?,
                 progress: (@Sendable (NodeEvent) -> Void)? = nil,
                 completion: (@Sendable (Result<PeerRef, EngineError>) -> Void)?) {
        queue.async { [self] in
            let label = "stream \(stream.remoteDescription)"
            guard state.withLock({ !$0.stopped && $0.dialsInFlight.insert(label).inserted }) else {
                stream.close()
                completion?(.failure(.network("already connecting over \(label)")))
                return
            }
            initiate(name: "syncpeer-stream-dial", inFlight: label, hello: makeHello(context: context, port: listenPort),
                     connect: { stream }, failed: { [self] error in
                stream.close()
                emitError(nil, "cannot connect over \(label): \(error.description)")
                completion?(.failure(.connection("cannot connect over \(label)", error)))
            }, connected: { [self] channel in
                let session = register(channel, role: .initiator, dialAddress: nil)
                session.pairCompletion = completion
                session.pairProgress = progress
                begin(session, standing: standing(of: channel, expected: expected, address: label))
            })
        }
    }

    /// The listener's end: the handshake as responder on its own thread, then a session as
    /// for an accepted connection. Not counted against the listener's handshake slots: the
    /// caller, not a remote address, decides how many streams it hands over. Any thread.
    func accept(over stream: any ByteStream) {
        queue.async { [self] in
            let hello = makeHello(context: nil, port: listenPort)
            OSThread.start(name: "syncpeer-stream-handshake") { [self] in
                respond(over: stream, hello: hello, source: "stream \(stream.remoteDescription)", dialBackHost: nil)
            }
        }
    }
}
