#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// Offers: a send offered (or offered again after a restart, recorded), an offer received,
/// checked, resumed or held for the user's answer, then accepted or declined.
extension TransferService {
    /// After a restart: unfinished outgoing transfers recorded in the index are offered again
    /// (rebuilt from their source files) when their peer connects.
    func resumeRecordedOutgoing(for session: LinkSession) {
        let all: [TransferRecord]
        do throws(IndexError) { all = try store.transfers(deviceID: session.deviceKey) } catch {
            // Not "nothing to resume": the user learns why the sends wait.
            emitError(session.peer, "cannot read the transfer records to offer unfinished sends to \(session.peer.name) again: \(error)")
            return
        }
        let records = all.filter { $0.direction == .send && $0.state.isUnfinished }
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
                    guard transfers.outgoing[id] == nil else { return }
                    do throws(IndexError) {
                        guard try store.transfer(id: record.id)?.state.isUnfinished ?? true else { return }
                    } catch {
                        // It may have been cancelled meanwhile: not offered again on a guess.
                        emitError(peer, "cannot read the transfer record of \(record.name) (\(record.id.prefix(8))) "
                            + "to offer it to \(peer.name) again: \(error.description)")
                        return
                    }
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

    /// Marks unfinished recorded sends of the same source to the same peer as superseded.
    func supersedeRecordedSends(of source: String, to peerKey: String, by id: TransferID) {
        let records: [TransferRecord]
        do throws(IndexError) { records = try store.transfers(deviceID: peerKey) } catch {
            emitError(nil, "cannot read the transfer records to mark earlier sends of \(source) as superseded: \(error)")
            return
        }
        for record in records
        where record.direction == .send && record.state.isUnfinished && record.finalPath == source && record.id != id.description {
            recordTransfer(record, "that it was superseded") { store throws(IndexError) in
                try store.updateTransferState(id: record.id, to: .cancelled, error: "superseded by transfer \(id.description.prefix(8))")
            }
        }
    }

    func recordOutgoing(_ transfer: OutgoingTransfer, source: String) {
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

    /// An offer arrived: the facts found here, the steps `OfferMachine` chooses.
    func offerReceived(_ offer: TransferOffer, from session: LinkSession) {
        let machine = OfferMachine(role: .receive, id: offer.id, peer: session.peer.name)
        if let existing = transfers.incoming[offer.id] {
            // The sender offers again (after a reconnect): answer with what we hold.
            let otherPeer = existing.peerKey != session.deviceKey
            var fits = true
            if !otherPeer && existing.layout.isStreamed && existing.state != .offered {
                // Continued after its manifest streamed: the offer has it whole now.
                if let layout = Self.continuedLayout(of: existing, by: offer) {
                    let rootHash = PreparedOffer.contentHash(of: offer, manifests: layout.manifests)
                    existing.with { t in
                        t.layout = layout
                        t.rootHash = rootHash
                    }
                } else {
                    fits = false
                }
            }
            let event = OfferMachine.Event.offeredAgain(otherPeer: otherPeer, fits: fits, directory: existing.directory)
            carryOut(machine.handle(event, in: existing.state), on: existing, session: session)
            return
        }
        let (arrival, transfer) = checkArrival(offer, from: session)
        carryOut(machine.handle(.offerArrived(arrival), in: nil), on: transfer, session: session)
    }

    /// What a new offer is: refused (past the bounds, unsound, an ID not the peer's), a
    /// duplicate of a receive running here, one accepted before (resumed), or new; with the
    /// transfer it would be (not registered yet) unless refused.
    private func checkArrival(_ offer: TransferOffer, from session: LinkSession) -> (OfferMachine.Arrival, IncomingTransfer?) {
        // Past the peer's bounds on offers waiting for an answer: declined before anything
        // is decoded or kept.
        if let refusal = pendingOfferRefusal(offer, from: session) { return (.overBound(refusal), nil) }
        // Hostile input: every manifest must decode and match its entry; every path must be safe.
        let manifests: [Manifest], streamedSizes: [UInt64], paths: [SafePath]
        do {
            (manifests, streamedSizes, paths) = try Self.checkedEntries(of: offer)
        } catch {
            return (.refused(peer: "refused: \(error)", note: "\(error)"), nil)
        }
        // An ID this node knows from another peer (or from one of its own sends) is never
        // resumed: that would bypass the user's decision and write into someone else's
        // partial file. IDs are random, so an honest sender never collides. A streamed
        // offer is always a new transfer (one offered again has every manifest): its ID is
        // never one this node knows, whose rows it would otherwise trust.
        // (A record this node cannot read is no reason to ask again or start over: the
        // offer is refused with the index's error, and the sender may offer it again.)
        let known: TransferRecord?
        do throws(IndexError) { known = try store.transfer(id: offer.id.description) } catch { return Self.unreadable(error) }
        if let known, known.deviceID != session.deviceKey || known.direction != .receive || !streamedSizes.isEmpty {
            let why = known.deviceID == session.deviceKey && known.direction == .receive
                ? "a streamed offer reuses the ID of a transfer it already made" : "its transfer ID belongs to a transfer with another peer"
            return (.refused(peer: "refused: this transfer ID belongs to another transfer", note: why), nil)
        }
        let layout = ChunkLayout(manifests: manifests, streamedSizes: streamedSizes)
        let rootHash = layout.isComplete ? PreparedOffer.contentHash(of: offer, manifests: manifests) : TransferRecord.unknownRootHash
        let transfer = IncomingTransfer(offer: offer, layout: layout, rootHash: rootHash, paths: paths,
                                        peerKey: session.deviceKey, peer: session.peer)

        // Accepted before (same ID, or the same content from the same peer): resume. (A
        // streamed manifest names no content yet: only its ID can be known.)
        var record = known
        if record == nil && !layout.isStreamed {
            do throws(IndexError) {
                record = try store.resumableTransfer(deviceID: session.deviceKey, rootHash: rootHash, direction: .receive)
            } catch { return Self.unreadable(error) }
        }
        if let record, record.state.isUnfinished, let directory = record.partialPath {
            if transfers.incoming.values.contains(where: { $0.recordID == record.id }) {
                return (.alreadyReceiving(recordID: record.id), nil)
            }
            transfer.with { $0.recordID = record.id }
            return (.resumes(directory: directory), transfer)
        }
        // The same file from the same peer, interrupted, whose source changed since: resume by
        // reusing the chunks that still match (single files, with their manifest).
        let earlier: TransferRecord?
        do throws(IndexError) {
            earlier = offer.kind != .folder && !layout.isStreamed ? try supersededTransfer(for: offer, from: session.deviceKey) : nil
        } catch { return Self.unreadable(error) }
        if let earlier, let directory = earlier.partialPath {
            transfer.with { $0.supersedes = earlier }
            return (.resumes(directory: directory), transfer)
        }
        var autoAccept = config.autoAccept
        if !autoAccept {
            do throws(IndexError) { autoAccept = try store.peer(deviceID: session.deviceKey)?.autoAccept ?? false } catch {
                // Not accepted on a guess: the user is asked, and told why.
                emitError(session.peer, "cannot read whether offers from \(session.peer.name) are accepted "
                    + "automatically, so this one waits for an answer: \(error.description)")
            }
        }
        return (.new(receiveWaiting: !transfers.receiveWaiters.isEmpty, autoAccept: autoAccept), transfer)
    }

    /// An offer refused because the transfer records cannot be read: the sender is told
    /// that much, the user here the index's error.
    private static func unreadable(_ error: IndexError) -> (OfferMachine.Arrival, IncomingTransfer?) {
        (.refused(peer: "refused: the receiver cannot read its transfer records", note: "cannot read the transfer records: \(error)"), nil)
    }

    /// An offer's entries, checked (hostile input): each manifest decoded and matching its
    /// entry (or streaming), each path safe, a bounded number of chunks, no entry twice, no
    /// file that is also a folder.
    private static func checkedEntries(of offer: TransferOffer) throws -> ([Manifest], [UInt64], [SafePath]) {
        var manifests: [Manifest] = []
        var streamedSizes: [UInt64] = []
        var paths: [SafePath] = []
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
        return (manifests, streamedSizes, paths)
    }

    func take(_ transfer: IncomingTransfer, with waiter: ReceiveWaiter) {
        transfer.addObserver(waiter.observer)
        answer(transfer, accept: waiter.accept, directory: waiter.directory)
    }

    /// The user's (or a waiting `receive`'s) answer to an offer.
    func answer(_ transfer: IncomingTransfer, accept: Bool, directory: String?) {
        let machine = OfferMachine(role: .receive, id: transfer.id, peer: transfer.peer.name)
        carryOut(machine.handle(.answered(accept: accept, directory: directory), in: transfer.state), on: transfer, session: nil)
    }

    /// Moves to preparing and opens the partial files in `directory`.
    func acceptIncoming(_ transfer: IncomingTransfer, into directory: String) {
        transfer.with { t in
            t.directory = directory
            t.shared.move(to: .preparing)
        }
        startReceiving(transfer, into: directory)
    }

    /// An unfinished receive of a file with the same name from the same peer (not running).
    private func supersededTransfer(for offer: TransferOffer, from deviceKey: String) throws(IndexError) -> TransferRecord? {
        let records = try store.transfers(deviceID: deviceKey)
        let running = Set(transfers.incoming.values.map(\.recordID))
        return records.first { record in
            record.direction == .receive && record.state.isUnfinished && record.name == offer.name
                && record.id != offer.id.description && !running.contains(record.id)
        }
    }
}
