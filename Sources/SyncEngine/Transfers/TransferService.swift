#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import Foundation
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

    // MARK: - Requests (any thread)

    /// Sends a file or folder (or a spooled stream) to `target` (resolved by the caller).
    /// The observer sees progress and then the end (completed, declined, failed). A peer
    /// that is not connected now is no error: the transfer waits for it ("waiting for
    /// carol…") and is offered as soon as a session to it is up.
    func send(path: String, to target: Target, name: String?, spoolFile: String?,
              cancellation: SendCancellation? = nil,
              observer: @escaping @Sendable (NodeEvent) -> Void,
              completion: @escaping @Sendable (Result<TransferInfo, EngineError>) -> Void) {
        let request = SendRequest(path: path, target: target, name: name, spoolFile: spoolFile, cancellation: cancellation,
                                  observer: TransferObserver(progress: observer, completion: completion), requested: now())
        DispatchQueue.global().async { [self] in
            // A large fresh file to a peer that takes streamed manifests is offered at once and
            // hashed while it is sent; anything else is hashed first.
            let streaming: PreparedOffer?
            do throws(EngineError) {
                streaming = spoolFile != nil ? nil
                    : try PreparedOffer.streaming(path: path, name: name, minimumSize: config.streamManifestFrom, indexed: indexedManifest)
            } catch {
                completion(.failure(error))
                return
            }
            guard let streaming else {
                prepareWhole(request)
                return
            }
            queue.async { [self] in
                // (Also the same file, unchanged, to the same peer, already on its way: joined.)
                if mayStream(request) || transfers.outgoing.values.contains(where: {
                    $0.peerKey == target.deviceKey && !$0.isFinished && Self.sameSources($0.prepared, streaming)
                }) {
                    offerPrepared(streaming, request)
                } else {
                    DispatchQueue.global().async { [self] in prepareWhole(request) }
                }
            }
        }
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

    /// What `send` was asked, carried from queue to queue.
    struct SendRequest: Sendable {
        let path: String
        let target: Target
        let name: String?
        let spoolFile: String?
        let cancellation: SendCancellation?
        let observer: TransferObserver
        let requested: Int64
    }

    /// Chunks and hashes every file of the request, then offers it (`offerPrepared`). Off the
    /// node's queue: it reads every byte, and shows it (a large file takes seconds before
    /// there is anything to offer).
    private func prepareWhole(_ request: SendRequest) {
        let shownName = request.name ?? URL(fileURLWithPath: request.path).lastPathComponent
        let started = ContinuousClock.now
        var lastShown: ContinuousClock.Instant?
        let preparing: (Int64, Int64) -> Void = { done, total in
            let now = ContinuousClock.now
            guard lastShown == nil || done == total || now - lastShown! >= Self.progressInterval else { return }
            lastShown = now
            let elapsed = now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let rate = seconds > 0 ? Double(done) / seconds : 0
            request.observer.progress(.transfer(TransferInfo(direction: .send, peer: request.target.peer, name: shownName,
                                                             state: .preparing, bytes: done, total: total, rate: rate,
                                                             eta: rate > 0 ? max(0, Double(total - done) / rate) : nil,
                                                             time: self.now())))
        }
        let prepared: PreparedOffer
        var reuse: ((String, PreparedOffer.FileStamp) -> Manifest?)?
        if request.spoolFile == nil { reuse = indexedManifest }
        do throws(EngineError) {
            prepared = try PreparedOffer.build(path: request.path, name: request.name, kind: request.spoolFile == nil ? .file : .stream,
                                               indexed: reuse, progress: preparing)
        } catch {
            request.observer.completion(.failure(error))
            return
        }
        queue.async { [self] in offerPrepared(prepared, request) }
    }

    /// Offers what `send` prepared (on the node's queue): joins an unfinished transfer of
    /// the same content to the same peer, continues a recorded one, or starts a new one.
    private func offerPrepared(_ prepared: PreparedOffer, _ request: SendRequest) {
        let target = request.target
        let observer = request.observer
        let spoolFile = request.spoolFile
        let cancellation = request.cancellation
        if cancellation?.isCancelled == true {
            if let spoolFile { unlink(spoolFile) }
            observer.completion(.failure(.refused("transfer cancelled before it was offered")))
            return
        }
        // The same content to the same peer, still unfinished: continue that transfer
        // (same ID, so the receiver resumes) instead of starting another. (A streamed offer
        // names no content yet: it joins only the same file, unchanged, sent the same way.)
        if let running = transfers.outgoing.values.first(where: {
            $0.peerKey == target.deviceKey && !$0.isFinished
                && (!prepared.isStreamed && $0.prepared.rootHash == prepared.rootHash || Self.sameSources($0.prepared, prepared))
        }) {
            running.addObserver(observer)
            if cancellation?.attach(running.id.description) == false {
                perform(.cancelledHere, on: running)
                return
            }
            if running.state == .paused, let session = currentSession(target) {
                offer(running, on: session)
            } else {
                emitTransfer(running, force: true)
            }
            if let spoolFile { unlink(spoolFile) }
            return
        }
        var prepared = prepared
        var recorded: TransferRecord?
        if !prepared.isStreamed {
            // The same content from the same source that finished while this request
            // was hashing (a send resumed by itself after a restart): that transfer is
            // this request's result, not a reason to send a second copy.
            let records = (try? store.transfers(deviceID: target.deviceKey)) ?? []
            if spoolFile == nil, let finished = records.first(where: {
                $0.direction == .send && $0.state == .completed && $0.rootHash == prepared.rootHash
                    && $0.finalPath == request.path && $0.updatedAt >= request.requested
            }) {
                observer.completion(.success(Self.recordEvent(finished, store: store)))
                return
            }
            // (Not one running here: that transfer is the one to join, or another content.)
            let running = transfers.outgoing
            recorded = records.first {
                $0.direction == .send && $0.state.isUnfinished && Self.continues($0, prepared, source: request.path)
                    && TransferID(hex: $0.id).map { running[$0] == nil } ?? false
            }
            if let recorded, let id = TransferID(hex: recorded.id) {
                prepared = prepared.withID(id)
            }
        }
        let transfer = OutgoingTransfer(prepared: prepared, peerKey: target.deviceKey, peer: target.peer, spoolFile: spoolFile)
        transfer.addObserver(observer)
        table { $0.outgoing[transfer.id] = transfer }
        if recorded == nil {
            supersedeRecordedSends(of: request.path, to: target.deviceKey, by: transfer.id)
            recordOutgoing(transfer, source: request.path)
        } else if recorded?.rootHash == TransferRecord.unknownRootHash {
            recordWholeManifest(transfer)
        }
        if cancellation?.attach(transfer.id.description) == false {
            perform(.cancelledHere, on: transfer)
            return
        }
        if prepared.isStreamed { startHashing(transfer) }
        guard let session = currentSession(target) else {
            pauseOutgoing(transfer, reason: Self.waitingReason(target.peer.name))
            return
        }
        offer(transfer, on: session)
    }

    /// Why a transfer to a peer that is not connected waits: `transfers` shows it, and the
    /// progress line says "waiting for NAME…".
    static func waitingReason(_ name: String) -> String {
        "waiting for \(name) to connect: queued, it goes out as soon as \(name) is online"
    }

    /// Waits for the next offer and accepts it into `directory` (or declines it).
    func receiveNext(directory: String?, accept: Bool,
                            observer: @escaping @Sendable (NodeEvent) -> Void,
                            completion: @escaping @Sendable (Result<TransferInfo, EngineError>) -> Void) {
        queue.async { [self] in
            let waiter = ReceiveWaiter(directory: directory, accept: accept,
                                       observer: TransferObserver(progress: observer, completion: completion))
            // An offer already waiting for a decision is taken at once.
            if let pending = transfers.incoming.values.first(where: { $0.state == .offered && !$0.resumed }) {
                take(pending, with: waiter)
            } else {
                table { $0.receiveWaiters.append(waiter) }
            }
        }
    }

    /// Accepts or declines an offer by transfer ID (or a unique prefix of at least 4 hex digits).
    func answerOffer(_ idText: String, accept: Bool, directory: String?,
                            observer: (@Sendable (NodeEvent) -> Void)? = nil,
                            completion: (@Sendable (Result<TransferInfo, EngineError>) -> Void)? = nil) throws(EngineError) -> TransferInfo {
        let result: Result<TransferInfo, EngineError> = queue.sync {
            let candidates = transfers.incoming.values.filter { $0.state == .offered && $0.id.description.hasPrefix(idText.lowercased()) }
            guard candidates.count == 1, let incoming = candidates.first else {
                return .failure(candidates.isEmpty
                    ? .notFound("no offer '\(idText)' is waiting; see 'syncpeer transfers'")
                    : .invalidArgument("'\(idText)' matches \(candidates.count) offers; give more of the ID"))
            }
            if let observer, let completion {
                incoming.addObserver(TransferObserver(progress: observer, completion: completion))
            }
            if accept {
                acceptIncoming(incoming, into: directory ?? config.receiveDirectory)
            } else {
                declineIncoming(incoming, reason: "declined by the user")
            }
            return .success(transferEvent(incoming, force: true))
        }
        return try result.get()
    }

    /// Cancels a transfer in either direction; a receiver's partial data is removed.
    func cancelTransfer(_ idText: String) throws(EngineError) -> TransferInfo {
        let result: Result<TransferInfo, EngineError> = queue.sync {
            let id = idText.lowercased()
            if let transfer = transfers.outgoing.values.first(where: { $0.id.description.hasPrefix(id) && !$0.isFinished }) {
                perform(.cancelledHere, on: transfer)
                return .success(transferEvent(transfer, force: true))
            }
            if let transfer = transfers.incoming.values.first(where: { $0.id.description.hasPrefix(id) && !$0.isFinished }) {
                perform(.cancelledHere, on: transfer)
                return .success(transferEvent(transfer, force: true))
            }
            // Not running: an unfinished transfer in the index (after a restart).
            let recorded: [TransferRecord]
            do throws(IndexError) { recorded = try store.transfers() } catch { return .failure(.index(error)) }
            if let record = recorded.first(where: { $0.id.hasPrefix(id) && $0.state.isUnfinished }) {
                if record.direction == .receive, let directory = record.partialPath {
                    removeStaged(record.id, in: directory, name: record.name)
                }
                do throws(IndexError) { try store.updateTransferState(id: record.id, to: .cancelled, error: "cancelled") } catch {
                    return .failure(.index(error))
                }
                return .success(TransferInfo(transfer: record.id, direction: record.direction == .send ? .send : .receive,
                                             name: record.name, state: .cancelled, time: now()))
            }
            return .failure(.notFound("no unfinished transfer '\(idText)'; see 'syncpeer transfers'"))
        }
        return try result.get()
    }

    /// Offers paused outgoing transfers again (to peers that are connected). An ID that
    /// names no unfinished transfer (running or recorded) is not found, as for `cancel`.
    func resumeTransfers(_ idText: String?) throws(EngineError) -> ResumeResult {
        let result: Result<ResumeResult, EngineError> = queue.sync {
            let prefix = idText?.lowercased()
            func matches(_ id: String) -> Bool { prefix.map { id.hasPrefix($0) } ?? true }
            if prefix != nil {
                let running = transfers.outgoing.values.contains { matches($0.id.description) && !$0.isFinished }
                    || transfers.incoming.values.contains { matches($0.id.description) && !$0.isFinished }
                let records: [TransferRecord]
                do throws(IndexError) { records = try store.transfers() } catch { return .failure(.index(error)) }
                let recorded = records.contains { matches($0.id) && $0.state.isUnfinished }
                guard running || recorded else {
                    return .failure(.notFound("no unfinished transfer '\(idText ?? "")'; see 'syncpeer transfers'"))
                }
            }
            var count = 0
            for transfer in transfers.outgoing.values where transfer.state == .paused && matches(transfer.id.description) {
                if let session = link?.connectedSession(device: transfer.peerKey) {
                    offer(transfer, on: session)
                    count += 1
                }
            }
            return .success(ResumeResult(offered: count))
        }
        return try result.get()
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

    /// After a restart: unfinished outgoing transfers recorded in the index are offered again
    /// (rebuilt from their source files) when their peer connects.
    private func resumeRecordedOutgoing(for session: LinkSession) {
        let records = ((try? store.transfers(deviceID: session.deviceKey)) ?? []).filter {
            $0.direction == .send && $0.state.isUnfinished
        }
        for record in records {
            guard let id = TransferID(hex: record.id), transfers.outgoing[id] == nil,
                  let source = record.finalPath else { continue }
            let spool = record.partialPath
            let peer = session.peer
            let key = session.deviceKey
            let sessionID = session.id
            DispatchQueue.global().async { [self] in
                let reuse: ((String, PreparedOffer.FileStamp) -> Manifest?)?
                if spool == nil {
                    reuse = indexedManifest
                } else {
                    reuse = nil
                }
                guard let prepared = try? PreparedOffer.build(path: source, name: record.name,
                                                              kind: spool == nil ? .file : .stream, id: id,
                                                              indexed: reuse) else {
                    queue.async { [self] in
                        recordTransfer(record, "its failed state") { store throws(IndexError) in
                            try store.updateTransferState(id: record.id, to: .failed, error: "source \(source) is gone")
                        }
                    }
                    return
                }
                queue.async { [self] in
                    // (A `send` of the same file may have taken it up meanwhile.)
                    guard transfers.outgoing[id] == nil,
                          (try? store.transfer(id: record.id))?.state.isUnfinished ?? true else { return }
                    var prepared = prepared
                    if !Self.continues(record, prepared, source: source) {
                        // The source changed: a new transfer, for which the receiver reuses the
                        // chunks of the interrupted one that still match.
                        prepared = prepared.withID(.random())
                    }
                    let transfer = OutgoingTransfer(prepared: prepared, peerKey: key, peer: peer, spoolFile: spool)
                    table { $0.outgoing[transfer.id] = transfer }
                    if transfer.id != id {
                        supersedeRecordedSends(of: source, to: key, by: transfer.id)
                        recordOutgoing(transfer, source: source)
                    } else if record.rootHash == TransferRecord.unknownRootHash {
                        recordWholeManifest(transfer)
                    }
                    // (The session may have changed while the source was read.)
                    if let session = currentSession(Target(sessionID: sessionID, deviceKey: key, peer: peer)) {
                        offer(transfer, on: session)
                    } else {
                        pauseOutgoing(transfer, reason: Self.waitingReason(peer.name))
                    }
                }
            }
        }
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
                perform(.peerDeclined(reason), on: transfer)
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

    // MARK: Sending

    func offer(_ transfer: OutgoingTransfer, on session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        let sessionID = session.id
        // A streamed offer goes out once; any later one waits for the whole manifest
        // (`hashed` offers it), so that the receiver's accept can name what it holds.
        let offer: TransferOffer? = transfer.with { t in
            if t.prepared.isStreamed && t.hashedFrom != nil {
                t.offerWhenHashed = true
                t.shared.pauseReason = "\(transfer.name) is being hashed; offered again when it is"
                return nil
            }
            t.hashedFrom = t.prepared.isStreamed ? t.layout.offeredChunkCount : nil
            t.shared.sessionID = sessionID
            t.awaitingSuccessor = false
            t.shared.move(to: .offered)
            if let window = t.window {
                // Shown until the receiver answers with what it holds (never "0%" on a resume).
                t.heldBefore = max(t.heldBefore, Int64(window.confirmedBytes))
            }
            t.window = nil
            return t.prepared.offer
        }
        guard let offer else {
            emitTransfer(transfer, force: true, reason: transfer.pauseReason)
            return
        }
        link?.send([.offer(offer)], on: sessionID)
        emitTransfer(transfer, force: true)
    }

    private func acceptReceived(_ id: TransferID, have: [UInt8], from session: LinkSession) {
        guard let transfer = transfers.outgoing[id], transfer.peerKey == session.deviceKey else { return }
        let (state, layout, listed) = transfer.with { ($0.shared.state, $0.layout, $0.hashedFrom ?? $0.layout.chunkCount) }
        guard state == .offered else { return }
        // The bitmap covers the chunks the offer listed (a streamed manifest's come later).
        guard let haveSet = ChunkBitmap.decode(have, count: listed) else {
            perform(.malformedAccept, on: transfer)
            return
        }
        let window = SendWindow(sizes: layout.chunkSizes(), have: haveSet, windowBytes: config.sendWindowBytes)
        transfer.with { $0.window = window }
        announceResent(transfer, have: haveSet, on: session)
        // What the receiver already holds was not moved now: the rate counts from here.
        let clock = transfer.elapsedSeconds()
        transfer.with { t in
            t.shared.move(to: .active)
            t.shared.meter.restart(time: clock, bytes: t.confirmedBytes)
        }
        recordTransfer(transfer, "its active state") { store throws(IndexError) in
            try store.updateTransferState(id: id.description, to: .active)
        }
        emitTransfer(transfer, force: true)
        pump(transfer)
    }

    /// What an acknowledgement did to the window.
    private enum AckStep: Sendable {
        case ignored, taken, rejected(String)
    }

    private func ackReceived(_ id: TransferID, index chunk: Int, ok: Bool, from session: LinkSession) {
        guard let transfer = transfers.outgoing[id], transfer.peerKey == session.deviceKey else { return }
        let step: AckStep = transfer.with { t in
            guard t.window != nil else { return .ignored }
            do throws(SendWindow.Failure) {
                try t.window!.ack(chunk, ok: ok)
            } catch {
                return .rejected(error.description)
            }
            return .taken
        }
        switch step {
        case .ignored:
            return
        case let .rejected(why):
            perform(.windowRejected(why), on: transfer)
            return
        case .taken:
            emitTransfer(transfer, force: false)
            pump(transfer)
        }
    }

    /// When `bytes` more may go to keep a transfer at `rate` bytes per second since its
    /// first paced chunk (`pacing`, which counts them).
    private static func pace(_ pacing: inout (start: ContinuousClock.Instant, bytes: Int64)?, bytes: Int64, rate: Int64,
                             now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        var current = pacing ?? (start: now, bytes: 0)
        let due = current.start + .seconds(Double(current.bytes) / Double(rate))
        current.bytes += bytes
        pacing = current
        return due
    }

    /// What `pump` found to do, taken in one step of the transfer's lock.
    private enum PumpStep: Sendable {
        case idle
        case finishing
        case send(batch: [Int], layout: ChunkLayout, sources: [PreparedOffer.Source], hashedFrom: Int)
    }

    /// Puts the next chunks of the window on the wire (read and verified on `io`).
    func pump(_ transfer: OutgoingTransfer) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let sessionID = transfer.with({ $0.shared.state == .active && $0.window != nil ? $0.shared.sessionID : nil }),
              let session = link?.session(sessionID) else { return }
        let step: PumpStep = transfer.with { t in
            guard t.window != nil else { return .idle }
            let batch = t.window!.next()
            t.countSent(batch)
            if t.window!.isComplete {
                // (A streamed manifest's next chunks are not hashed yet: `hashed` pumps again.)
                guard t.layout.isComplete else { return .idle }
                t.shared.move(to: .finishing)
                return .finishing
            }
            return .send(batch: batch, layout: t.layout, sources: t.prepared.sources, hashedFrom: t.hashedFrom ?? Int.max)
        }
        let layout: ChunkLayout, sources: [PreparedOffer.Source], batch: [Int], hashedFrom: Int
        switch step {
        case .idle:
            return
        case .finishing:
            emitTransfer(transfer, force: true)
            return
        case let .send(b, l, s, h):
            (batch, layout, sources, hashedFrom) = (b, l, s, h)
        }
        let id = transfer.id
        let rate = Int64(config.sendRateBytesPerSecond)
        for index in batch {
            guard let (entry, chunk) = layout.locate(index) else { continue }
            // A chunk the offer left out names its hash: the receiver learns the manifest so.
            let hash = index >= hashedFrom ? chunk.hash.bytes : nil
            transfer.io.async { [self] in
                // One step of the lock per chunk: its pacing and its file's reader.
                let now = ContinuousClock.now
                let (existing, due) = transfer.with { t in
                    (t.readers[entry], rate > 0 ? Self.pace(&t.pacing, bytes: Int64(chunk.size), rate: rate, now: now) : nil)
                }
                if let due, due > now { Thread.sleep(forTimeInterval: (due - now) / .seconds(1)) }
                do throws(FileError) {
                    let reader: ChunkReader
                    if let existing { reader = existing } else {
                        reader = try ChunkReader(path: sources[entry].path)
                        transfer.with { $0.readers[entry] = reader }
                    }
                    // The receiver verifies every chunk; re-hashing here too cost a third of the
                    // sender's CPU (bench: 1 GiB send 229 → see README). A cheap check that the
                    // file is the one that was chunked catches edits made since.
                    try sources[entry].checkUnchanged()
                    // Read straight from the file into the channel's send buffer, one Noise
                    // message at a time: no chunk-sized buffer, no copy of the chunk.
                    let failure = session.chunks.writeChunk(id: id, index: UInt32(index), hash: hash, count: Int(chunk.size)) {
                        (buffer, offset) throws(FileError) in
                        try reader.read(at: chunk.offset + UInt64(offset), into: buffer)
                    }
                    // (A failed channel ends the session, which pauses the transfer.)
                    if let failure { throw failure }
                } catch {
                    let reason = error.kind == .hashMismatch || error.kind == .changedOnDisk
                        ? Self.changedWhileSent(sources[entry].path)
                        : error.description
                    queue.async { [self] in
                        perform(.sourceUnreadable(path: sources[entry].path, reason: reason), on: transfer)
                    }
                }
            }
        }
    }

    func pauseOutgoing(_ transfer: OutgoingTransfer, reason: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        transfer.with { t in
            t.shared.sessionID = nil
            t.shared.move(to: .paused)
            t.shared.pauseReason = reason
        }
        recordTransfer(transfer, "its paused state") { store throws(IndexError) in
            try store.updateTransferState(id: transfer.id.description, to: .paused, error: reason)
        }
        emitTransfer(transfer, force: true, reason: reason)
    }

    func finishOutgoing(_ transfer: OutgoingTransfer, state: TransferState, error: EngineError?) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard transfer.move(to: state) else { return }
        let recordID = transfer.id.description
        let layout = transfer.layout
        recordTransfer(transfer, "its \(state) state") { store throws(IndexError) in
            try store.updateTransferState(id: recordID, to: state.recorded, error: error?.description)
            if state == .completed && layout.isComplete {
                try store.markChunksVerified(transferID: recordID, indices: Array(0..<layout.chunkCount))
            }
        }
        let event = transferEvent(transfer, force: true, reason: error?.description)
        emit(.transfer(event))
        for observer in transfer.takeObservers() {
            if let error { observer.completion(.failure(error)) } else { observer.completion(.success(event)) }
        }
        pruneHistory()
        // (Only itself: a transfer under its ID that took over must not go with it.)
        table { if $0.outgoing[transfer.id] === transfer { $0.outgoing[transfer.id] = nil } }
        if let spool = transfer.spoolFile, state == .completed || state == .cancelled || state == .declined {
            unlink(spool)
        }
        let hashing = transfer.with { t in
            defer { t.hashing = nil }
            return t.hashing
        }
        hashing?.stop()
        // (The readers close their files once out of the lock.)
        transfer.io.async { _ = transfer.with { t in
            defer { t.readers = [:] }
            return t.readers
        } }
    }

    /// Marks unfinished recorded sends of the same source to the same peer as superseded.
    private func supersedeRecordedSends(of source: String, to peerKey: String, by id: TransferID) {
        for record in (try? store.transfers(deviceID: peerKey)) ?? []
        where record.direction == .send && record.state.isUnfinished && record.finalPath == source && record.id != id.description {
            recordTransfer(record, "that it was superseded") { store throws(IndexError) in
                try store.updateTransferState(id: record.id, to: .cancelled, error: "superseded by transfer \(id.description.prefix(8))")
            }
        }
    }

    private func recordOutgoing(_ transfer: OutgoingTransfer, source: String) {
        let time = now()
        let (layout, prepared) = transfer.with { ($0.layout, $0.prepared) }
        let chunks = layout.transferChunks()
        // A streamed send records its source's mode and mtime: what tells, after a restart,
        // whether the file it was hashing is still the same (its content hash is not known yet).
        let streamed = prepared.isStreamed
        let record = TransferRecord(id: transfer.id.description, direction: .send, deviceID: transfer.peerKey,
                                    name: transfer.name, size: transfer.totalSize,
                                    mode: streamed ? prepared.offer.entries[0].mode : 0,
                                    mtimeNs: streamed ? prepared.sources[0].stamp.mtimeNs : 0,
                                    rootHash: prepared.rootHash, chunkCount: layout.chunkCount,
                                    state: .offered, partialPath: transfer.spoolFile, finalPath: source, bytesDone: 0,
                                    error: nil, createdAt: time, updatedAt: time)
        recordTransfer(transfer, "the start") { store throws(IndexError) in try store.insertTransfer(record, chunks: chunks) }
    }

    // MARK: Receiving

    private func offerReceived(_ offer: TransferOffer, from session: LinkSession) {
        if let existing = transfers.incoming[offer.id] {
            // The sender offers again (after a reconnect): answer with what we hold.
            guard existing.peerKey == session.deviceKey else {
                link?.send([.decline(id: offer.id, reason: "refused: this transfer ID belongs to another transfer")], on: session.id)
                emitError(session.peer, "refused an offer from \(session.peer.name): its transfer ID belongs to a transfer with another peer")
                return
            }
            if existing.layout.isStreamed && existing.state != .offered {
                // Continued after its manifest streamed: the offer has it whole now.
                guard let layout = Self.continuedLayout(of: existing, by: offer) else {
                    link?.send([.decline(id: offer.id, reason: "refused: the offer does not match the transfer it continues")], on: session.id)
                    emitError(session.peer, "refused an offer from \(session.peer.name): it does not match the transfer it continues")
                    return
                }
                let rootHash = PreparedOffer.contentHash(of: offer, manifests: layout.manifests)
                existing.with { t in
                    t.layout = layout
                    t.rootHash = rootHash
                }
            }
            let sessionID = session.id
            let (again, directory) = existing.with { t -> (Bool, String?) in
                t.shared.sessionID = sessionID
                if t.shared.state == .offered { return (false, nil) }
                t.resumed = true
                t.shared.move(to: .preparing)
                return (true, t.directory)
            }
            if again, let directory { startReceiving(existing, into: directory) }
            return
        }
        // Past the peer's bounds on offers waiting for an answer: declined before anything
        // is decoded or kept.
        if let refusal = pendingOfferRefusal(offer, from: session) {
            link?.send([.decline(id: offer.id, reason: refusal)], on: session.id)
            pendingOfferRefused(refusal, from: session)
            return
        }
        // Hostile input: every manifest must decode and match its entry; every path must be safe.
        var manifests: [Manifest] = []
        var streamedSizes: [UInt64] = []
        var paths: [SafePath] = []
        do {
            _ = try SafePath.validateName(offer.name)
            for entry in offer.entries {
                if entry.manifest.isEmpty {
                    // Its manifest streams (`hashedChunk` frames), as do all after it.
                    guard entry.size >= 1 else { throw EngineError.refused("an empty file's manifest cannot stream") }
                    streamedSizes.append(entry.size)
                } else {
                    guard streamedSizes.isEmpty else { throw EngineError.refused("a manifest after an entry whose manifest streams") }
                    let manifest = try Manifest.decode(entry.manifest)
                    guard manifest.fileSize == entry.size else { throw EngineError.refused("manifest size differs from the entry size") }
                    manifests.append(manifest)
                }
                paths.append(try SafePath(offer.kind == .folder ? entry.path : offer.name))
            }
            // What a streamed manifest may grow to is bounded before anything is kept for it.
            var most = manifests.reduce(0) { $0 + $1.chunks.count }
            for size in streamedSizes {
                guard ChunkLayout.mayStream(size: size) else { throw EngineError.refused("a file of \(size) bytes is too large to stream its manifest") }
                most += ChunkLayout.mostChunks(streamedSize: size)
            }
            guard most <= WireLimits.maxHaveBitmap * 8 else { throw EngineError.refused("the offer may have more than \(WireLimits.maxHaveBitmap * 8) chunks") }
            // A folder's entries must be distinct files: no duplicates, and no file that is
            // also a parent directory of another ("a" and "a/b").
            // By bytes: names that differ only by Unicode normalization are two files.
            var files = Set<PathKey>()
            var directories = Set<PathKey>()
            for path in paths {
                guard files.insert(PathKey(path.string)).inserted else { throw EngineError.refused("the entry '\(path)' appears twice") }
                for depth in 1..<path.components.count {
                    directories.insert(PathKey(path.components.prefix(depth).joined(separator: "/")))
                }
            }
            if let clash = files.first(where: { directories.contains($0) }) {
                throw EngineError.refused("'\(clash)' is both a file and a folder in the offer")
            }
        } catch {
            link?.send([.decline(id: offer.id, reason: "refused: \(error)")], on: session.id)
            emitError(session.peer, "refused an offer from \(session.peer.name): \(error)")
            return
        }
        // An ID this node knows from another peer (or from one of its own sends) is never
        // resumed: that would bypass the user's decision and write into someone else's
        // partial file. IDs are random, so an honest sender never collides. A streamed
        // offer is always a new transfer (one offered again has every manifest): its ID is
        // never one this node knows, whose rows it would otherwise trust.
        if let known = try? store.transfer(id: offer.id.description),
           known.deviceID != session.deviceKey || known.direction != .receive || !streamedSizes.isEmpty {
            let why = known.deviceID == session.deviceKey && known.direction == .receive
                ? "a streamed offer reuses the ID of a transfer it already made" : "its transfer ID belongs to a transfer with another peer"
            link?.send([.decline(id: offer.id, reason: "refused: this transfer ID belongs to another transfer")], on: session.id)
            emitError(session.peer, "refused an offer from \(session.peer.name): \(why)")
            return
        }
        let layout = ChunkLayout(manifests: manifests, streamedSizes: streamedSizes)
        let rootHash = layout.isComplete ? PreparedOffer.contentHash(of: offer, manifests: manifests) : TransferRecord.unknownRootHash
        let transfer = IncomingTransfer(offer: offer, layout: layout, rootHash: rootHash, paths: paths,
                                        peerKey: session.deviceKey, peer: session.peer)
        transfer.sessionID = session.id
        table { $0.incoming[offer.id] = transfer }

        // Accepted before (same ID, or the same content from the same peer): resume. (A
        // streamed manifest names no content yet: only its ID can be known.)
        let record = (try? store.transfer(id: offer.id.description)) ?? (layout.isStreamed ? nil : try? store.resumableTransfer(
            deviceID: session.deviceKey, rootHash: rootHash, direction: .receive))
        if let record, record.state.isUnfinished, let directory = record.partialPath {
            if transfers.incoming.values.contains(where: { $0 !== transfer && $0.recordID == record.id }) {
                table { $0.incoming[offer.id] = nil }
                link?.send([.decline(id: offer.id, reason: "this content is already being received (transfer \(record.id.prefix(8)))")], on: session.id)
                return
            }
            transfer.with { t in
                t.resumed = true
                t.recordID = record.id
            }
            acceptIncoming(transfer, into: directory)
            return
        }
        // The same file from the same peer, interrupted, whose source changed since: resume by
        // reusing the chunks that still match (single files, with their manifest).
        if offer.kind != .folder, !layout.isStreamed, let earlier = supersededTransfer(for: offer, from: session.deviceKey),
           let directory = earlier.partialPath {
            transfer.with { t in
                t.resumed = true
                t.supersedes = earlier
            }
            acceptIncoming(transfer, into: directory)
            return
        }
        emit(.offer(.init(peer: session.peer, transfer: offer.id.description, name: offer.name,
                          total: Int64(offer.totalSize), files: offer.entries.count, time: now())))
        if let waiter = table({ $0.receiveWaiters.isEmpty ? nil : $0.receiveWaiters.removeFirst() }) {
            take(transfer, with: waiter)
        } else if config.autoAccept || ((try? store.peer(deviceID: session.deviceKey))?.autoAccept ?? false) {
            acceptIncoming(transfer, into: config.receiveDirectory)
        } else {
            emitTransfer(transfer, force: true)
        }
    }

    private func take(_ transfer: IncomingTransfer, with waiter: ReceiveWaiter) {
        transfer.addObserver(waiter.observer)
        if waiter.accept {
            acceptIncoming(transfer, into: waiter.directory ?? config.receiveDirectory)
        } else {
            declineIncoming(transfer, reason: "declined by the user")
        }
    }

    private func declineIncoming(_ transfer: IncomingTransfer, reason: String) {
        perform(.declinedHere(reason), on: transfer)
    }

    private func acceptIncoming(_ transfer: IncomingTransfer, into directory: String) {
        transfer.with { t in
            t.directory = directory
            t.shared.move(to: .preparing)
        }
        startReceiving(transfer, into: directory)
    }

    /// Opens (or re-opens) the partial files, finds the chunks they already hold, records
    /// the transfer and sends the accept.
    private func startReceiving(_ transfer: IncomingTransfer, into directory: String) {
        // Chunks this process verified and wrote (a link lost and back, no restart): held.
        // (The layout is the node queue's: a streamed manifest grows there.)
        let (recordID, known, layout, resumed, earlier) = transfer.with {
            ($0.recordID, $0.verified, $0.layout, $0.resumed, $0.supersedes)
        }
        let receiveDirectory = config.receiveDirectory
        transfer.io.async { [self] in
            // What is open already (a link lost and back), taken in one step and put back
            // after (only `io` opens and closes them).
            var (openTarget, openTree, partials) = transfer.with { ($0.target, $0.tree, $0.partials) }
            var have = Set<Int>()
            let outcome: Result<Void, FileError> = Result { () throws(FileError) in
                if openTarget == nil {
                    // The default receive folder (~/Downloads) is made when it is missing; a
                    // folder the user named must exist (the CLI checks it).
                    if directory == receiveDirectory, !FileManager.default.fileExists(atPath: directory) {
                        do throws(FileError) { try DurableNames.createDirectories(directory) } catch {
                            // The message goes to the sender: the system's words, never the path.
                            let code = error.errno
                            throw FileError(kind: .io, operation: "create the receive folder", path: directory,
                                            message: code.map { String(cString: strerror($0)) } ?? "cannot create it")
                        }
                    }
                    openTarget = try DirectoryHandle(path: directory)
                }
                let target = openTarget!
                if transfer.offer.kind == .folder {
                    if openTree == nil {
                        let staging = try target.openSubdirectory(PartialFile.stagingDirectoryName, create: true)
                        openTree = try staging.openSubdirectory(recordID + ".tree", create: true)
                    }
                }
                for entry in layout.fileSizes.indices {
                    let partial: PartialFile
                    if let open = partials[entry] { partial = open } else {
                        if let tree = openTree {
                            let resolved = try transfer.paths[entry].resolve(under: tree, createDirectories: true)
                            partial = try PartialFile(transferID: "\(recordID)-\(entry)", in: resolved.directory)
                        } else {
                            partial = try PartialFile(transferID: recordID, in: target)
                        }
                        partials[entry] = partial
                    }
                    // What it holds: the chunks verified in this process (a link lost and
                    // back), without reading them; for the rest the file is the truth:
                    // re-hashed, also the chunks the index recorded as verified before a
                    // restart (a row is no proof that the bytes are still intact on disk), and
                    // it finds the chunks written just before a crash.
                    // (A streamed manifest's chunks are all to come.)
                    guard let manifest = layout.manifest(of: entry) else { continue }
                    if resumed {
                        let first = layout.firstChunk[entry]
                        var trusted = Set<Int>()
                        for global in known where layout.range(of: entry).contains(global) {
                            trusted.insert(global - first)
                        }
                        for local in try partial.verifiedChunks(of: manifest, trusting: trusted) {
                            have.insert(first + local)
                        }
                    }
                    if let earlier {
                        for local in try copyMatchingChunks(from: earlier, in: target, to: partial, manifest: manifest)
                        where !have.contains(layout.firstChunk[entry] + local) {
                            have.insert(layout.firstChunk[entry] + local)
                        }
                    }
                }
            }
            let (opened, tree, open) = (openTarget, openTree, partials)
            transfer.with { t in
                t.target = opened
                t.tree = tree
                t.partials = open
            }
            let held = have
            queue.async { [self] in
                let have = held
                switch outcome {
                case let .failure(error):
                    perform(.cannotOpen(path: directory, reason: error.description, cause: error.message,
                                        diskFull: error.kind == .diskFull), on: transfer)
                case .success:
                    let layout = transfer.layout
                    let verifiedBytes = have.reduce(Int64(0)) { total, index in
                        total + Int64(layout.locate(index)?.chunk.size ?? 0)
                    }
                    transfer.with { t in
                        t.verified = have
                        t.verifiedBytes = verifiedBytes
                    }
                    recordIncoming(transfer, directory: directory)
                    let clock = transfer.elapsedSeconds()
                    transfer.with { t in
                        t.shared.move(to: .active)
                        t.shared.meter.restart(time: clock, bytes: t.verifiedBytes)
                    }
                    sendTo(transfer, [.accept(id: transfer.id, have: ChunkBitmap.encode(have, count: layout.offeredChunkCount))])
                    emitTransfer(transfer, force: true)
                    if layout.isComplete && have.count == layout.chunkCount { complete(transfer) }
                }
            }
        }
    }

    /// An unfinished receive of a file with the same name from the same peer (not running).
    private func supersededTransfer(for offer: TransferOffer, from deviceKey: String) -> TransferRecord? {
        let records: [TransferRecord] = (try? store.transfers(deviceID: deviceKey)) ?? []
        let running = Set(transfers.incoming.values.map(\.recordID))
        return records.first { record in
            record.direction == .receive && record.state.isUnfinished && record.name == offer.name
                && record.id != offer.id.description && !running.contains(record.id)
        }
    }

    /// Copies the verified chunks of an earlier partial file that the new manifest also
    /// contains (by hash, wherever they now are) into the new partial file; returns their
    /// indices in the new manifest. Runs on the transfer's `io` queue; the earlier partial
    /// is removed afterwards and its record marked as superseded.
    private func copyMatchingChunks(from earlier: TransferRecord, in target: DirectoryHandle, to partial: PartialFile,
                                    manifest: Manifest) throws(FileError) -> [Int] {
        guard let old = try PartialFile.existing(transferID: earlier.id, in: target) else { return [] }
        let chunks = (try? store.transferChunks(transferID: earlier.id)) ?? []
        // Every chunk the earlier partial may hold (recorded or not: verification is batched),
        // each checked by its hash when read.
        var located: [ChunkHash: TransferChunk] = [:]
        for chunk in chunks {
            if let hash = ChunkHash(bytes: chunk.hash) { located[hash] = chunk }
        }
        if earlier.rootHash == TransferRecord.unknownRootHash {
            // Its manifest streamed, and its rows end where its last record did: what the
            // partial file holds past them is cut again (the same cuts as the sender's, from
            // the end of the last row on) to find the chunks written since.
            let known = chunks.map { UInt64($0.offset + $0.size) }.max() ?? 0
            let end = min(try old.size(), UInt64(max(0, earlier.size)))
            if known < end, let cut = try? ChunkReader(path: old.path).cutChunks(
                from: known, to: end, parameters: .forFileSize(UInt64(earlier.size))) {
                for chunk in cut where located[chunk.hash] == nil {
                    located[chunk.hash] = TransferChunk(index: -1, offset: Int64(chunk.offset), size: Int64(chunk.size),
                                                        hash: chunk.hash.bytes, verified: false)
                }
            }
        }
        var copied: [Int] = []
        if !located.isEmpty {
            let reader = try ChunkReader(path: old.path)
            for (index, chunk) in manifest.chunks.enumerated() {
                guard let source = located[chunk.hash], source.size == Int64(chunk.size) else { continue }
                let ref = ChunkRef(offset: UInt64(source.offset), size: chunk.size, hash: chunk.hash)
                guard let bytes = try? reader.bytes(of: ref, verify: true) else { continue }
                try partial.writeChunk(bytes, as: chunk)
                copied.append(index)
            }
        }
        try? old.remove()
        do throws(IndexError) {
            try store.updateTransferState(id: earlier.id, to: .cancelled, error: "superseded: the source changed and was sent again")
        } catch {
            let reason = Self.recordFailure("that it was superseded", name: earlier.name, id: earlier.id, error)
            queue.async { [self] in emitError(nil, reason) }
        }
        return copied
    }

    /// What a chunk that arrived is, taken in one step of the transfer's lock.
    private enum ArrivedStep: Sendable {
        case ignored, duplicate, write(entry: Int, chunk: ChunkRef)
    }

    /// What the write of a chunk did, taken in one step of the transfer's lock.
    private enum WrittenStep: Sendable {
        case ignored, failedVerification(Int), failed(directory: String?), verified(sessionID: UInt64?, whole: Bool)
    }

    func chunkReceived(_ id: TransferID, index: Int, data: [UInt8], from session: LinkSession) {
        guard let transfer = transfers.incoming[id], transfer.peerKey == session.deviceKey else { return }
        let size = Int64(data.count)
        let arrived: ArrivedStep = transfer.with { t in
            guard t.shared.state == .active, let (entry, chunk) = t.layout.locate(index) else { return .ignored }
            if t.verified.contains(index) {
                // (Not counted against an announced figure: a chunk the sender sent before is
                // in it already, and one it sends for the first time was not sent twice.)
                t.duplicateBytes += size
                return .duplicate
            }
            return .write(entry: entry, chunk: chunk)
        }
        let entry: Int, chunk: ChunkRef
        switch arrived {
        case .ignored:
            return
        case .duplicate:
            sendTo(transfer, [.chunkAck(id: id, index: UInt32(index), ok: true)])
            return
        case let .write(e, c):
            (entry, chunk) = (e, c)
        }
        // Until it is on disk the chunk counts as unhandled in the session's flow: a sender
        // faster than our disk (or one resending chunks in flight) is read no faster.
        let flow = session.flow
        flow.received(data.count)
        transfer.io.async { [self] in
            defer { flow.handled(data.count) }
            var outcome: FileError?
            do throws(FileError) {
                guard let partial = transfer.with({ $0.partials[entry] }) else { return }
                try partial.writeChunk(data, as: chunk)
            } catch {
                outcome = error
            }
            let failure = outcome
            queue.async { [self] in
                let written: WrittenStep = transfer.with { t in
                    guard t.shared.state == .active else { return .ignored }
                    if let failure {
                        guard failure.kind == .hashMismatch else { return .failed(directory: t.directory) }
                        t.duplicateBytes += size
                        t.attemptDuplicates += size
                        t.badChunks += 1
                        return .failedVerification(t.badChunks)
                    }
                    if t.verified.insert(index).inserted {
                        t.verifiedBytes += Int64(chunk.size)
                        t.unrecorded.append(index)
                    }
                    return .verified(sessionID: t.shared.sessionID,
                                     whole: t.layout.isComplete && t.verified.count == t.layout.chunkCount)
                }
                switch written {
                case .ignored:
                    return
                case let .failedVerification(count):
                    if count > Self.maxBadChunks {
                        perform(.tooManyBadChunks(count), on: transfer)
                        return
                    }
                    emitError(transfer.peer, "chunk \(index) of \(transfer.name) failed verification; asked for it again")
                    sendTo(transfer, [.chunkAck(id: id, index: UInt32(index), ok: false)])
                case let .failed(directory):
                    // Disk full or another write error: keep the partial data, pause.
                    let reason = failure?.kind == .diskFull
                        ? "disk full on the receiver (\(directory ?? "")): free some space, then resume"
                        : failure?.description ?? ""
                    perform(.writeFailed(path: directory ?? "", reason: reason), on: transfer)
                case let .verified(sessionID, whole):
                    if let sessionID { link?.send([.chunkAck(id: id, index: UInt32(index), ok: true)], on: sessionID) }
                    recordVerified(transfer, force: false)
                    emitTransfer(transfer, force: false)
                    if whole { complete(transfer) }
                }
            }
        }
    }

    /// Every chunk is verified: make each file final (fsync, mode, mtime, no-replace rename);
    /// a folder appears at once, complete.
    private func complete(_ transfer: IncomingTransfer) {
        guard transfer.with({ t in
            if t.completing { return false }
            t.completing = true
            return true
        }) else { return }
        recordVerified(transfer, force: true)
        transfer.move(to: .finishing)
        let (recordID, layout) = transfer.with { ($0.recordID, $0.layout) }
        transfer.io.async { [self] in
            let (openTarget, partials, openTree) = transfer.with { ($0.target, $0.partials, $0.tree) }
            let outcome: Result<String, FileError> = Result { () throws(FileError) in
                guard let target = openTarget else { throw FileError(kind: .io, operation: "finish", path: "", message: "no target") }
                for (entry, manifest) in layout.manifests.enumerated() {
                    guard let partial = partials[entry] else { continue }
                    let meta = transfer.offer.entries[entry]
                    let time = FileTimestamp(nanosecondsSinceEpoch: meta.mtimeNanoseconds)
                    if let tree = openTree {
                        let resolved = try transfer.paths[entry].resolve(under: tree, createDirectories: true)
                        try partial.commit(as: resolved.name, mode: meta.mode, modificationTime: time, size: manifest.fileSize, onConflict: .fail)
                        resolved.directory.removeIfEmpty(PartialFile.stagingDirectoryName)
                    } else {
                        let name = try partial.commit(as: transfer.offer.name, mode: meta.mode, modificationTime: time,
                                                      size: manifest.fileSize, onConflict: .pickUniqueName)
                        target.removeIfEmpty(PartialFile.stagingDirectoryName)
                        return target.path + "/" + name
                    }
                }
                guard let tree = openTree else { return target.path }
                tree.removeIfEmpty(PartialFile.stagingDirectoryName)
                let staging = try target.openSubdirectory(PartialFile.stagingDirectoryName)
                var name = transfer.offer.name
                while true {
                    do throws(FileError) {
                        try staging.move(recordID + ".tree", to: target, as: name)
                        break
                    } catch where error.kind == .alreadyExists {
                        name = target.uniqueName(for: transfer.offer.name)
                    }
                }
                target.removeIfEmpty(PartialFile.stagingDirectoryName)
                try target.sync()
                return target.path + "/" + name
            }
            queue.async { [self] in
                switch outcome {
                case let .success(path):
                    recordTransfer(transfer, "its completion") { store throws(IndexError) in
                        try recordStreamedRows(transfer, in: store)
                        try store.updateTransferState(id: recordID, to: .completed)
                        try store.setTransferFinalPath(id: recordID, path: path)
                    }
                    transfer.with { $0.finalPath = path }
                    perform(.placed, on: transfer)
                case let .failure(error):
                    let directory = transfer.with { t in
                        t.completing = false
                        return t.directory
                    }
                    let reason = error.kind == .diskFull ? "disk full on the receiver: free some space, then resume" : error.description
                    perform(.writeFailed(path: directory ?? "", reason: reason), on: transfer)
                }
            }
        }
    }

    func finishIncoming(_ transfer: IncomingTransfer, state: TransferState, error: EngineError?) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard transfer.move(to: state) else { return }
        let recordID = transfer.recordID
        let message = error?.description ?? (state == .declined || state == .cancelled ? state.rawValue : nil)
        recordTransfer(transfer, "its \(state) state") { store throws(IndexError) in
            // An offer never accepted has no record to update.
            if try store.transfer(id: recordID) == nil { return }
            try store.updateTransferState(id: recordID, to: state.recorded, error: message)
        }
        let event = transferEvent(transfer, force: true, reason: error?.description)
        emit(.transfer(event))
        for observer in transfer.takeObservers() {
            if let error { observer.completion(.failure(error)) } else { observer.completion(.success(event)) }
        }
        pruneHistory()
        table { $0.incoming[transfer.id] = nil }
        // (The files close once out of the lock.)
        transfer.io.async { _ = transfer.with { t in
            defer { t.partials = [:] }
            return t.partials
        } }
    }

    func removePartials(_ transfer: IncomingTransfer) {
        let recordID = transfer.recordID
        let name = transfer.name
        transfer.io.async { [self] in
            let (partials, target) = transfer.with { t in
                defer { t.partials = [:] }
                return (t.partials, t.target)
            }
            let paths = partials.values.map(\.path)
            // Closes each file; what is not removed here is removed by path, reported and retried.
            for partial in partials.values { try? partial.remove() }
            let directory = target?.path
            retryCleanup("the partial data of \(name)", on: transfer.io) { () throws(FileError) in
                for path in paths where unlink(path) != 0 && errno != ENOENT {
                    throw FileError(kind: .io, operation: "remove partial file", path: path, message: String(cString: strerror(errno)))
                }
                if let directory { try Self.removeStaged(recordID, in: directory, files: false) }
            }
        }
    }

    private func recordIncoming(_ transfer: IncomingTransfer, directory: String) {
        let (recordID, layout, rootHash, verified, verifiedBytes) = transfer.with {
            ($0.recordID, $0.layout, $0.rootHash, $0.verified, $0.verifiedBytes)
        }
        var known = false
        recordTransfer(transfer, "its active state") { store throws(IndexError) in
            guard let record = try store.transfer(id: recordID) else { return }
            known = true
            try store.updateTransferState(id: recordID, to: .active)
            if record.chunkCount != layout.chunkCount || record.rootHash != rootHash {
                // Recorded while its manifest streamed: the rows of the whole one (a row keeps
                // its verified mark only where it names the same chunk).
                try store.addTransferChunks(transferID: recordID, chunks: layout.transferChunks(), chunkCount: layout.chunkCount,
                                            rootHash: layout.isComplete ? rootHash : nil)
            }
        }
        transfer.with { $0.recordedRows = layout.chunkCount }
        if known { return }
        let chunks = layout.transferChunks(verified: verified)
        let time = now()
        let first = transfer.offer.entries.first
        let record = TransferRecord(id: recordID, direction: .receive, deviceID: transfer.peerKey, name: transfer.name,
                                    size: transfer.totalSize, mode: first?.mode ?? 0, mtimeNs: first?.mtimeNanoseconds ?? 0,
                                    rootHash: rootHash, chunkCount: layout.chunkCount, state: .active,
                                    partialPath: directory, finalPath: nil, bytesDone: verifiedBytes,
                                    error: nil, createdAt: time, updatedAt: time)
        recordTransfer(transfer, "the start") { store throws(IndexError) in try store.insertTransfer(record, chunks: chunks) }
    }

    /// Records verified chunks in batches (one transaction per batch), each batch only once
    /// the partial files hold it durably: a resume trusts what is recorded without reading
    /// it again (`startReceiving`), so a chunk recorded as verified must be on disk, a power
    /// loss included. The sync runs on the transfer's `durability` queue while `io` goes on
    /// writing; writes of the batch's chunks returned before it was taken (their `io`
    /// closure reported them), so the sync covers them.
    func recordVerified(_ transfer: IncomingTransfer, force: Bool) {
        let instant = ContinuousClock.now
        // One step of the lock: whether a batch is due, and taking it.
        let batch: (indices: [Int], entries: Set<Int>)? = transfer.with { t in
            guard !t.unrecorded.isEmpty else { return nil }
            guard !t.recording else {
                if force { t.recordForced = true }
                return nil
            }
            guard force || t.unrecorded.count >= Self.recordBatch || instant - t.lastRecord > .milliseconds(500)
                    || t.unrecorded.reduce(Int64(0), { $0 + Int64(t.layout.locate($1)?.chunk.size ?? 0) }) >= Self.recordBatchBytes
            else { return nil }
            let indices = t.unrecorded
            t.unrecorded = []
            t.lastRecord = instant
            t.recording = true
            return (indices, Set(indices.compactMap { t.layout.locate($0)?.entry }))
        }
        guard let (indices, entries) = batch else { return }
        transfer.io.async { [self] in
            // A descriptor of each file the batch touched (partial files live on `io`).
            let partials = transfer.with { $0.partials }
            var opened: [DataSync] = []
            var openFailure: FileError?
            var wholeFileSystem = false
            for entry in entries.sorted() {
                guard let partial = partials[entry] else { continue }
                do throws(FileError) { opened.append(try partial.dataSync()) } catch { openFailure = openFailure ?? error }
                // One `syncfs` makes a batch of many files durable: one descriptor is enough
                // (where `syncfs` is a barrier: not on FUSE, see `DurableNames`).
                if entries.count > 1, let first = opened.first, first.syncfsIsBarrier {
                    wholeFileSystem = true
                    break
                }
            }
            let syncs = opened
            let whole = wholeFileSystem
            let failedToOpen = openFailure
            transfer.durability.async { [self] in
                var failure = failedToOpen
                for sync in syncs where failure == nil {
                    do throws(FileError) { try sync.sync(fileSystem: whole) } catch { failure = error }
                }
                let failed = failure
                queue.async { [self] in
                    let forced = transfer.with { t in
                        defer { t.recordForced = false }
                        t.recording = false
                        return t.recordForced
                    }
                    if let failed {
                        // Not recorded: a resume reads these chunks again (the file is the truth).
                        emitError(transfer.peer, "cannot make \(indices.count) verified chunks of \(transfer.name) durable: \(failed.description)")
                    } else if !recordTransfer(transfer, "\(indices.count) verified chunks", { store throws(IndexError) in
                        try recordStreamedRows(transfer, in: store)
                        try store.markChunksVerified(transferID: transfer.recordID, indices: indices)
                    }) {
                        // Kept for the next batch (the partial file holds them); not retried
                        // at once, or a failing index would be written to in a loop.
                        transfer.with { $0.unrecorded.insert(contentsOf: indices, at: 0) }
                        return
                    }
                    // What arrived meanwhile (and a forced record asked for meanwhile);
                    // nothing once the files are being committed (fsynced, then renamed).
                    if !transfer.completing && !transfer.isFinished { recordVerified(transfer, force: forced) }
                }
            }
        }
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
