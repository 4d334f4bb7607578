#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import Synchronization
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import PeerNet
internal import PeerWire

/// Resources: sending and receiving files and folders, chunked, verified and resumable.
///
///     sender                                   receiver
///     offer(id, entries + manifests) ───────▶  new: ask the user (or auto-accept)
///                                              known id / same content: resume
///     ◀─────────────────── accept(id, have)    (trusts recorded chunks, re-hashes the rest)
///     chunk(i) … (window of 16 MiB) ────────▶  verify hash → pwrite at offset →
///                                              per batch: fdatasync, then record
///     ◀──────────────────── chunkAck(i, ok)    (bad hash: ok = false, sent again)
///     ◀───────────────────── done(id, ok)      all chunks: fsync, mode, mtime, rename
///
/// Transfers survive lost connections: both ends keep their state (the receiver its partial
/// files and verified chunks), and when the peers reconnect the sender offers again under the
/// same ID; the receiver answers with the chunks it holds, so at most the chunks that were in
/// flight travel twice.
///
/// The transfer service owns the transfers table and every transfer's state. It reaches
/// the rest of the engine only through its roles (Roles.swift): `PeerLink` for
/// sessions, `TransferStore` for the index's transfer rows, `EventSink` for events.
final class TransferService: Reporting, Sendable {
    static let progressInterval: Duration = .milliseconds(200)
    static let recordBatch = 64
    /// A batch is also recorded once it holds this many bytes: a resume after a crash reads
    /// again at most this much that arrived before the last record (plus what was in flight).
    static let recordBatchBytes: Int64 = 16 << 20
    /// Chunks failing verification that a transfer tolerates before it is stopped.
    static let maxBadChunks = 8

    /// The owner's serial queue (the node's): it orders the transfers' steps (frames,
    /// requests, session hooks); entry points confined to it check so
    /// (`dispatchPrecondition`). File I/O runs on each transfer's `io` queue.
    let queue: DispatchQueue
    let store: any TransferStore
    let events: any EventSink
    /// The manifest a shared folder's index holds for an unchanged file (`send` skips
    /// hashing it again); runs off `queue`.
    let indexedManifest: @Sendable (String, PreparedOffer.FileStamp) -> Manifest?

    /// The service's mutable state, inside `owned`'s lock (each transfer has its own).
    struct Owned: Sendable {
        var config: NodeConfig
        var link = WeakLink()
        var transfers = TransferTable()
        var cleanupRetry: Duration = .seconds(30)
    }
    /// Sessions (the node); weak: the node owns this service.
    struct WeakLink: Sendable {
        weak var value: (any PeerLink)?
    }
    let owned: Mutex<Owned>

    /// Its receive folder changes with `receive-dir`.
    var config: NodeConfig {
        get { owned.withLock { $0.config } }
        set { owned.withLock { $0.config = newValue } }
    }
    var link: (any PeerLink)? {
        get { owned.withLock { $0.link.value } }
        set { owned.withLock { $0.link.value = newValue } }
    }
    /// Transfers in progress and `receive` clients waiting (a copy: change it with `table`).
    var transfers: TransferTable { owned.withLock { $0.transfers } }
    /// How long after a failed removal of a cancelled receive's data it is tried again
    /// (tests shorten it).
    var cleanupRetry: Duration {
        get { owned.withLock { $0.cleanupRetry } }
        set { owned.withLock { $0.cleanupRetry = newValue } }
    }

    /// Changes the transfers table in place, inside the lock (short and pure).
    @discardableResult
    func table<R: Sendable>(_ body: (inout TransferTable) -> R) -> R {
        owned.withLock { body(&$0.transfers) }
    }

    init(queue: DispatchQueue, store: any TransferStore, events: any EventSink, config: NodeConfig,
         indexedManifest: @escaping @Sendable (String, PreparedOffer.FileStamp) -> Manifest? = { _, _ in nil }) {
        self.queue = queue
        self.store = store
        self.events = events
        self.indexedManifest = indexedManifest
        owned = Mutex(Owned(config: config))
    }

    func emit(_ event: NodeEvent) {
        events.emit(event)
    }

    /// Where `send` goes: a paired peer, and its connected session if it has one.
    struct Target: Sendable {
        let sessionID: UInt64?
        let deviceKey: String
        let peer: PeerRef
    }

    /// The connected session to the target's peer now: the one the request named, or one
    /// that came up while the source was read (its `sessionConnected` found nothing to offer).
    func currentSession(_ target: Target) -> LinkSession? {
        if let session = target.sessionID.flatMap({ link?.session($0) }), session.isConnected { return session }
        return link?.connectedSession(device: target.deviceKey)
    }

    /// Why a send failed whose source changed while it was hashed or sent.
    static func changedWhileSent(_ path: String) -> String {
        "\(path) changed while it was being sent; send it again"
    }

    /// A recorded (not running) transfer as an event.
    static func recordEvent(_ record: TransferRecord, store: any TransferStore) -> TransferInfo {
        // Best effort: a name the index cannot give shows as "?" (the list itself was read).
        let name = (try? store.peer(deviceID: record.deviceID))?.name ?? "?"
        let peer = (try? DeviceID(parsing: record.deviceID)).map { PeerRef(id: $0, name: name) }
        return TransferInfo(transfer: record.id, direction: record.direction == .send ? .send : .receive, peer: peer,
                            name: record.name, state: TransferState(record.state),
                            // A completed transfer holds every byte (the count is recorded in batches).
                            bytes: record.state == .completed ? record.size : record.bytesDone, total: record.size,
                            path: record.direction == .receive ? record.finalPath : nil, reason: record.error,
                            time: record.updatedAt)
    }

    // MARK: - Session hooks (queue)

    /// A session is connected (paired): offers again what was interrupted.
    func sessionConnected(_ session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        // Offer again what was interrupted, under the same IDs, so the receiver resumes.
        for transfer in transfers.outgoing.values where transfer.peerKey == session.deviceKey
            && (transfer.state == .paused || transfer.awaitingSuccessor) {
            offer(transfer, on: session)
        }
        resumeRecordedOutgoing(for: session)
    }

    /// A session ended: its transfers pause (offers never answered are withdrawn), or, when
    /// it was `replaced` by another session with the peer, go on on that one without a pause.
    func sessionClosed(_ session: LinkSession, replaced: Bool = false) {
        dispatchPrecondition(condition: .onQueue(queue))
        table { $0.refusedOffers[session.id] = nil }
        var handedOver: [any TransferBase] = []
        for transfer in transfers.outgoing.values where transfer.sessionID == session.id && !transfer.isFinished {
            if replaced {
                handedOver.append(transfer)
                continue
            }
            perform(.linkLost("connection to \(session.peer.name) lost; resumes when it is back"), on: transfer)
        }
        for transfer in transfers.incoming.values where transfer.sessionID == session.id && !transfer.isFinished {
            transfer.sessionID = nil
            if transfer.state == .offered {
                // Never answered: forget it (the sender offers again when it reconnects).
                table { $0.incoming[transfer.id] = nil }
                var withdrawn = transferEvent(transfer, force: true)
                withdrawn.state = .withdrawn
                emit(.transfer(withdrawn))
                continue
            }
            if replaced {
                handedOver.append(transfer)
                continue
            }
            perform(.linkLost("connection to \(session.peer.name) lost; resumes when it is back"), on: transfer)
        }
        if !handedOver.isEmpty { handOver(handedOver, from: session) }
    }

    // MARK: - Frames (queue)

    /// Handles a transfer frame from `session`; false for any other frame (not this service's).
    func frameReceived(_ frame: Frame, from session: LinkSession) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        switch frame {
        case let .offer(offer): offerReceived(offer, from: session)
        case let .accept(id, have): acceptReceived(id, have: have, from: session)
        case let .decline(id, reason):
            if let transfer = transfers.outgoing[id], transfer.peerKey == session.deviceKey {
                let machine = OfferMachine(role: .send, id: id, peer: transfer.peer.name)
                carryOut(machine.handle(.declineArrived(reason), in: transfer.state), on: transfer, have: nil, session: session)
            }
        case let .cancel(id, reason):
            if let transfer = transfers.outgoing[id], transfer.peerKey == session.deviceKey {
                perform(.peerCancelled(reason), on: transfer)
            } else if let transfer = transfers.incoming[id], transfer.peerKey == session.deviceKey {
                perform(.peerCancelled(reason), on: transfer)
            }
        case let .done(id, ok, reason):
            if let transfer = transfers.outgoing[id], transfer.peerKey == session.deviceKey {
                perform(ok ? .peerFinished : .peerCouldNotFinish(reason), on: transfer)
            }
        case let .resent(id, bytes): resentReceived(id, bytes: bytes, from: session)
        case let .chunk(id, index, data): chunkReceived(id, index: Int(index), data: data, from: session)
        case let .hashedChunk(id, index, hash, data): hashedChunkReceived(id, index: Int(index), hash: hash, data: data, from: session)
        case let .chunkAck(id, index, ok): ackReceived(id, index: Int(index), ok: ok, from: session)
        default: return false
        }
        return true
    }

    // MARK: Events

    func sendTo(_ transfer: any TransferBase, _ frames: [Frame]) {
        guard let sessionID = transfer.sessionID else { return }
        link?.send(frames, on: sessionID)
    }

    /// The current state of a transfer as an event.
    func transferEvent(_ transfer: any TransferBase, force: Bool, reason: String? = nil) -> TransferInfo {
        let (shared, progress) = transfer.withProgress { ($0, $1) }
        return Self.event(of: transfer, shared, progress, clock: transfer.elapsedSeconds(), reason: reason, time: now())
    }

    /// A transfer's event from its fields as read in one step of its lock.
    private static func event(of transfer: any TransferBase, _ shared: TransferShared, _ progress: TransferProgress,
                              clock: Double, reason: String?, time: Int64) -> TransferInfo {
        let done = progress.direction == .send && shared.state == .completed ? transfer.totalSize : progress.done
        let remaining = max(0, transfer.totalSize - done)
        // A rate and a time to go only while bytes move: none while paused or waiting for an
        // answer (the last rate would be a lie), none while the window is still filling.
        let moving = shared.state == .active
        return TransferInfo(transfer: transfer.id.description, direction: progress.direction, peer: transfer.peer, name: transfer.name,
                            state: shared.state, bytes: done, total: transfer.totalSize, files: transfer.fileCount,
                            rate: moving ? shared.meter.rate(at: clock) : nil,
                            eta: shared.state.isFinished ? 0 : moving ? shared.meter.eta(remaining: remaining, at: clock) : nil,
                            path: progress.path, resent: progress.resent,
                            reason: reason ?? shared.recordFailure ?? (shared.state == .paused ? shared.pauseReason : nil), time: time)
    }

    /// Emits progress (at most every 200 ms unless `force`) to subscribers and observers.
    /// One step of the transfer's lock: the rate's sample, and the fields when it is due.
    func emitTransfer(_ transfer: any TransferBase, force: Bool, reason: String? = nil) {
        let instant = ContinuousClock.now
        let clock = transfer.elapsedSeconds()
        let due: (TransferShared, TransferProgress)? = transfer.withProgress { shared, progress in
            shared.meter.sample(time: clock, bytes: progress.done)
            guard force || instant - shared.lastEmit >= Self.progressInterval else { return nil }
            shared.lastEmit = instant
            return (shared, progress)
        }
        guard let (shared, progress) = due else { return }
        let event = NodeEvent.transfer(Self.event(of: transfer, shared, progress, clock: clock, reason: reason, time: now()))
        emit(event)
        for observer in shared.observers { observer.progress(event) }
    }

}
