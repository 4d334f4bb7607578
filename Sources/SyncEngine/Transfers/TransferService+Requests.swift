#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// What clients ask of transfers (any thread): send, receive, answer an offer, cancel, resume.
extension TransferService {
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
            // Unreadable, this send would start over what may be half sent already: the
            // user is told why it cannot go now.
            let records: [TransferRecord]
            do throws(IndexError) { records = try store.transfers(deviceID: target.deviceKey) } catch {
                if let spoolFile { unlink(spoolFile) }
                observer.completion(.failure(.index(error)))
                return
            }
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
            answer(incoming, accept: accept, directory: directory)
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
}
