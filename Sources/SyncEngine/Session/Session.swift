internal import Dispatch
internal import PeerCrypto
internal import PeerFiles
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// One live connection to a peer after its handshake: the secure channel, the state
/// machine and the bookkeeping around them. What changes is in `state` (a `Session.State`
/// behind a `Mutex`); the node's queue orders what happens to the session, and frames are
/// written on the session's own serial `sendQueue` so a slow peer never blocks the node.
final class Session: Sendable {
    let id: UInt64
    let channel: SecureChannel
    let peer: PeerRef
    /// Canonical compact device ID (the index's key).
    let deviceKey: String
    let publicKey: PublicKey
    /// Where this peer can be dialled ("host:port"), if known.
    let dialAddress: String?
    /// The invitation context the initiator sent, if any.
    let context: String?
    let sendQueue: DispatchQueue
    /// The machine, times, invitation, close reason, … (Session+State).
    let state: Mutex<State>

    /// How the session reaches the peer, as `peers` and `status` say it.
    var path: String { relayHost.map { "relay \($0)" } ?? "direct \(channel.remoteDescription)" }
    /// The last round trip in milliseconds.
    var roundTripMs: Double? {
        roundTrip.map { Double($0.components.seconds) * 1_000 + Double($0.components.attoseconds) / 1e15 }
    }

    /// What we hold for this peer (queued answers, unhandled requests); see `SessionFlow`.
    let flow = SessionFlow()
    /// Sends queued on `sendQueue` and not started yet (`queueSend`).
    private let queuedSends = PendingBytes()
    /// Where block answers are read and hashed before they are sent (`sendQueue` only).
    private let staging = BlockStaging()
    /// The unreliable lane (`sendUnreliable`): its own queue, so such a frame never waits
    /// behind the bulk frames queued on `sendQueue`, and the bytes waiting on it.
    let unreliableQueue: DispatchQueue
    let unreliablePending = PendingBytes()
    /// Bytes that may wait on the unreliable lane; beyond, unreliable frames are dropped.
    static let maxUnreliablePending = 256 * 1024

    init(id: UInt64, channel: SecureChannel, role: SessionMachine.Role, dialAddress: String?) {
        self.id = id
        self.channel = channel
        self.state = Mutex(State(role: role, now: .now))
        self.peer = PeerRef(id: channel.remoteDeviceID, name: channel.remoteHello.displayName)
        self.deviceKey = channel.remoteDeviceID.compact
        self.publicKey = channel.remoteStaticKey
        self.dialAddress = dialAddress
        self.context = channel.remoteHello.context
        self.sendQueue = DispatchQueue(label: "syncpeer.session.\(id).send")
        self.unreliableQueue = DispatchQueue(label: "syncpeer.session.\(id).unreliable")
        // Progress within a long send counts too: one 16 MiB block answer to a peer on a
        // 2 MB/s link is 8 s of writes, longer than the dead-peer time the stall check
        // allows without a completed write.
        let flow = self.flow
        channel.onWrite { flow.wrote() }
    }

    /// Queues frames for sending, in order.
    func send(_ frames: [Frame]) {
        guard !frames.isEmpty else { return }
        let now = ContinuousClock.now
        state.withLock { $0.lastSent = now }
        sendFromAnyThread(frames)
    }

    /// Queues frames from any thread (touches only immutable state): for transfer I/O
    /// queues that read chunks off the node's queue. The bytes count in `flow` until they
    /// are written; a write blocks at most the socket's send timeout.
    func sendFromAnyThread(_ frames: [Frame]) {
        let channel = self.channel
        queueSend(SessionFlow.size(of: frames)) { (more: Bool) throws(NetError) in try channel.send(frames, more: more) }
    }

    /// `FrameSender.sendBlockFromAnyThread`: in order with `sendFromAnyThread`'s frames. The
    /// block is filled into `staging` when its turn comes and sealed straight from there.
    func sendBlockFromAnyThread(request: UInt32, count: Int,
                                fill: @escaping @Sendable (UnsafeMutableRawBufferPointer) throws(FileError) -> Void) {
        let channel = self.channel
        let staging = self.staging
        queueSend(SessionFlow.size(of: .blockResponse(request: request, ok: true, data: [])) + count) { (more: Bool) throws(NetError) in
            defer { if !more { staging.release() } }
            let buffer = staging.take(count)
            do throws(FileError) {
                try fill(buffer)
            } catch {
                // Not read, or not the bytes asked for: refused, as an unreadable block is.
                return try channel.send([.blockResponse(request: request, ok: false, data: [])], more: more)
            }
            try channel.sendBlockResponse(request: request, bytes: UnsafeRawBufferPointer(buffer), more: more)
        }
    }

    /// Runs `send` on `sendQueue`, its `bytes` counted in `flow` until it is done.
    ///
    /// `send` gets `more` when another send is queued behind it: its last Noise message then
    /// waits for that one, so a burst of small frames (B: 10,000 block requests, and as many
    /// answers) shares messages and writes instead of one encryption and one syscall each.
    /// The last of a burst writes everything; every other job on `sendQueue` goes through
    /// `afterQueuedSends`, which flushes first.
    private func queueSend(_ bytes: Int, _ send: @escaping @Sendable (_ more: Bool) throws(NetError) -> Void) {
        let channel = self.channel
        let flow = self.flow
        let queued = self.queuedSends
        flow.queue(bytes)
        queued.count.add(1, ordering: .relaxed)
        sendQueue.async {
            let more = queued.count.subtract(1, ordering: .relaxed).newValue > 0
            do throws(NetError) {
                try send(more)
                flow.sent(bytes)
            } catch {
                // What an earlier send left waiting goes now (this one may have been refused
                // before it took the channel).
                if !more { try? channel.flush() }
                // Only a failed channel ends the session (not a frame refused before sending).
                flow.sent(bytes, failure: channel.failure.map { _ in error.description })
            }
        }
    }

    /// Sends `frame` past everything queued on `sendQueue`: it is written at the next frame
    /// boundary (`SecureChannel.sendUrgent`); false, and nothing is sent, when the link is
    /// saturated: the frames already on this lane still wait for the socket
    /// (`maxUnreliablePending`).
    func sendUnreliable(_ frame: Frame) -> Bool {
        let bytes = SessionFlow.size(of: frame)
        let before = unreliablePending.count.add(bytes, ordering: .relaxed).oldValue
        guard before + bytes <= Self.maxUnreliablePending else {
            unreliablePending.count.subtract(bytes, ordering: .relaxed)
            return false
        }
        let now = ContinuousClock.now
        state.withLock { $0.lastSent = now }
        let channel = self.channel
        let pending = self.unreliablePending
        unreliableQueue.async {
            try? channel.sendUrgent(frame)  // a failed channel ends the session through its reader
            pending.count.subtract(bytes, ordering: .relaxed)
        }
        return true
    }

    /// Ends a session refused at once: after what is queued (a close frame) is handed to
    /// the socket, close it, without waiting for the peer (a flood must not hold sockets).
    func closeAfterQueuedSends() {
        let channel = self.channel
        afterQueuedSends { channel.close() }
    }

    /// Ends the session gracefully: after everything queued is sent, half-close (so the
    /// peer reads our last frames, then the end of the stream), and close for good a moment
    /// later in case the peer never closes its side.
    func closeAfterPendingSends() {
        let channel = self.channel
        afterQueuedSends {
            channel.finishSending()
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(2)) { channel.close() }
        }
    }

    /// Runs `body` on `sendQueue` once everything queued before is handed to the socket:
    /// what the last of those sends left waiting (`queueSend`'s `more`) is written first.
    /// (`FrameSender.afterQueuedSends`.)
    func afterQueuedSends(_ body: @escaping @Sendable () -> Void) {
        let channel = self.channel
        sendQueue.async {
            try? channel.flush()
            body()
        }
    }
}

/// A count shared with the closures of a session's queues: the bytes waiting on its
/// unreliable lane, or the sends queued on its `sendQueue`.
final class PendingBytes: Sendable {
    let count = Atomic<Int>(0)
}
