internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// Streamed manifests (hello feature `streamed-manifest`): a large fresh file is offered at
/// once, without its manifest, and hashed while it is sent. Each chunk the offer left out
/// goes as a `hashedChunk` frame that names its hash, and the receiver learns the manifest
/// from them, chunk by chunk (`ChunkLayout.extend`). So sending starts within milliseconds
/// instead of after a whole read of the file, and the file is hashed while the chunks
/// already hashed are sent.
///
/// A streamed offer goes out once: if the transfer is interrupted, it is offered again only
/// once the file is hashed, whole, under the same ID, and the receiver answers with what it
/// holds as for any other offer.
extension TransferService {
    static let streamedManifestFeature = "streamed-manifest"
    /// The hashing thread hands its chunks over in batches of about this many bytes.
    static let hashedBatchBytes: UInt64 = 2 << 20

    /// Whether `request` (a file `PreparedOffer.streaming` would stream) may be offered with
    /// its manifest streamed: its peer is connected and takes it, and nothing of that source
    /// to that peer is unfinished (that goes whole, so that the receiver can resume it or
    /// reuse what it holds).
    func mayStream(_ request: SendRequest) -> Bool {
        guard let session = currentSession(request.target), session.streamedManifest else { return false }
        if transfers.outgoing.values.contains(where: {
            $0.peerKey == request.target.deviceKey && !$0.isFinished && $0.prepared.sources.contains { $0.path == request.path }
        }) { return false }
        // Unreadable: offered whole, whose preparing reads them again and reports the failure.
        guard let records = try? store.transfers(deviceID: request.target.deviceKey) else { return false }
        return !records.contains { $0.direction == .send && $0.state.isUnfinished && $0.finalPath == request.path }
    }

    /// Hashes the file of a streamed offer on a thread of its own and hands its chunks to
    /// `hashed` as they come.
    func startHashing(_ transfer: OutgoingTransfer) {
        let job = HashingJob()
        guard let source = transfer.with({ t -> PreparedOffer.Source? in
            guard let entry = t.layout.streamingEntry else { return nil }
            t.hashing = job
            return t.prepared.sources[entry]
        }) else { return }
        let size = UInt64(source.stamp.size)
        DispatchQueue.global().async { [self] in
            var batch: [ChunkRef] = []
            var batchBytes: UInt64 = 0
            do throws(FileError) {
                let chunker = try FileChunker(path: source.path, parameters: .forFileSize(size))
                while let chunk = try chunker.next() {
                    if job.isStopped { return }
                    // A batch goes once the next chunk exists: the last chunk always goes with
                    // the end (and its check of the file), so nothing can finish before it.
                    if batchBytes >= Self.hashedBatchBytes {
                        let ready = batch
                        queue.async { [self] in hashed(transfer, ready, job: job, end: nil) }
                        batch = []
                        batchBytes = 0
                    }
                    batch.append(chunk)
                    batchBytes += UInt64(chunk.size)
                }
                // What was hashed is the file offered only if it has not changed meanwhile.
                let unchanged = Result { () throws(FileError) in try source.checkUnchanged() }
                let ready = batch
                queue.async { [self] in hashed(transfer, ready, job: job, end: unchanged) }
            } catch {
                let reason = error.description
                queue.async { [self] in
                    guard transfer.hashing === job else { return }
                    perform(.sourceUnreadable(path: source.path, reason: reason), on: transfer)
                }
            }
        }
    }

    /// Chunks the hashing found (`end`: the last ones, and whether the file was unchanged):
    /// they join the layout, and the window when the offer is accepted; with the last, the
    /// offer is whole (and recorded so), and a paused transfer is offered again.
    private func hashed(_ transfer: OutgoingTransfer, _ chunks: [ChunkRef], job: HashingJob,
                        end: Result<Void, FileError>?) {
        // One step of the lock: the chunks join the layout (and the window).
        let step: (path: String, changed: Bool)? = transfer.with { t in
            guard t.hashing === job, !t.shared.state.isFinished else { return nil }
            let path = t.prepared.sources[t.layout.streamingEntry ?? 0].path
            let known = t.layout.chunkCount
            // The file grew (a chunk past its end), shrank (its chunks end early) or changed
            // otherwise (its stamp) while it was hashed.
            var changed = false
            do throws(ChunkLayout.ExtendError) {
                for chunk in chunks { try t.layout.extend(size: chunk.size, hash: chunk.hash) }
            } catch {
                changed = true
            }
            if let end {
                if !t.layout.isComplete { changed = true }
                if case .failure = end { changed = true }
            }
            if !changed, t.window != nil { t.window!.append(sizes: t.layout.chunkSizes(from: known)) }
            return (path, changed)
        }
        guard let (path, changed) = step else { return }
        guard !changed else {
            perform(.sourceUnreadable(path: path, reason: Self.changedWhileSent(path)), on: transfer)
            return
        }
        guard end != nil else {
            pump(transfer)
            return
        }
        let (prepared, layout) = transfer.with { t in
            t.hashing = nil
            return (t.prepared, t.layout)
        }
        let whole = prepared.completed(with: layout)
        do throws(WireError) { try Frame.offer(whole.offer).validate() } catch {
            // (Chunks as small as FastCDC allows, for a file near `PreparedOffer.streaming`'s bound.)
            perform(.sourceUnreadable(path: path, reason: "\(path) has too many chunks to offer again (\(error.description))"), on: transfer)
            return
        }
        transfer.prepared = whole
        recordWholeManifest(transfer)
        // (Paused, or without a session: one handed over to a duplicate's successor while it
        // was hashed waits for this offer, not for the handover's grace to pause it.)
        if transfer.offerWhenHashed, transfer.state == .paused || transfer.sessionID == nil,
           let session = link?.connectedSession(device: transfer.peerKey) {
            offer(transfer, on: session)
        } else if transfer.offerWhenHashed, transfer.state == .paused {
            pauseOutgoing(transfer, reason: Self.waitingReason(transfer.peer.name))
        } else {
            pump(transfer)
        }
    }

    /// Records the whole manifest of a transfer whose send record was made while it streamed
    /// (rows and root hash), so that a later `send` or restart knows its content.
    func recordWholeManifest(_ transfer: OutgoingTransfer) {
        let (layout, rootHash) = transfer.with { ($0.layout, $0.prepared.rootHash) }
        guard layout.isComplete else { return }
        let id = transfer.id.description
        recordTransfer(transfer, "its manifest") { store throws(IndexError) in
            try store.addTransferChunks(transferID: id, chunks: layout.transferChunks(), chunkCount: layout.chunkCount, rootHash: rootHash)
        }
    }

    /// Whether two offers send the same files, unchanged (paths and stamps), as the same
    /// thing (kind, name, modes).
    static func sameSources(_ a: PreparedOffer, _ b: PreparedOffer) -> Bool {
        a.sources.map(\.path) == b.sources.map(\.path) && a.sources.map(\.stamp) == b.sources.map(\.stamp)
            && a.offer.kind == b.offer.kind && a.offer.name == b.offer.name
            && a.offer.entries.map(\.mode) == b.offer.entries.map(\.mode)
    }

    /// Whether `prepared`, an offer of `source` with every manifest, continues the unfinished
    /// send `record`: the same content, or, for a send recorded while its manifest streamed
    /// (content not known), the same file unchanged since (size and mtime), sent as the same
    /// thing (name, mode).
    static func continues(_ record: TransferRecord, _ prepared: PreparedOffer, source: String) -> Bool {
        if record.rootHash != TransferRecord.unknownRootHash { return record.rootHash == prepared.rootHash }
        return record.finalPath == source && prepared.sources.count == 1 && record.size == prepared.totalSize
            && record.mtimeNs == prepared.sources[0].stamp.mtimeNs && record.name == prepared.offer.name
            && record.mode == prepared.offer.entries[0].mode
    }

    /// A chunk with its hash: the next one extends the streamed manifest, one known already
    /// (sent again) must be that chunk; anything else stops the transfer.
    func hashedChunkReceived(_ id: TransferID, index: Int, hash: [UInt8], data: [UInt8], from session: LinkSession) {
        guard let transfer = transfers.incoming[id], transfer.peerKey == session.deviceKey,
              let hash = ChunkHash(bytes: hash) else { return }
        // One step of the lock: the chunk extends the layout, or is one known.
        let step: HashedStep = transfer.with { t in
            guard t.shared.state == .active else { return .ignored }
            if index == t.layout.chunkCount {
                do throws(ChunkLayout.ExtendError) {
                    try t.layout.extend(size: UInt32(clamping: data.count), hash: hash)
                } catch {
                    return .broken("chunk \(index): \(error)")
                }
                return t.layout.isComplete ? .completed(t.layout) : .known
            } else if let known = t.layout.locate(index)?.chunk, Int(known.size) == data.count, known.hash == hash {
                // Sent again: the chunk it was.
                return .known
            }
            return .broken("chunk \(index) does not follow the \(t.layout.chunkCount) known")
        }
        switch step {
        case .ignored:
            return
        case let .broken(why):
            perform(.manifestBroken(why), on: transfer)
            return
        case let .completed(layout):
            let rootHash = PreparedOffer.contentHash(of: transfer.offer, manifests: layout.manifests)
            transfer.with { $0.rootHash = rootHash }
        case .known:
            break
        }
        chunkReceived(id, index: index, data: data, from: session)
    }

    /// The layout of `offer`, every manifest in it, that continues `transfer` (whose
    /// manifest streamed): the same files, and every chunk known so far the same. Nil when
    /// it is anything else.
    static func continuedLayout(of transfer: IncomingTransfer, by offer: TransferOffer) -> ChunkLayout? {
        let old = transfer.offer
        let known = transfer.layout
        guard offer.kind == old.kind, offer.name == old.name, offer.entries.count == old.entries.count else { return nil }
        var manifests: [Manifest] = []
        for (entry, before) in zip(offer.entries, old.entries) {
            guard entry.path == before.path, entry.size == before.size, entry.mode == before.mode,
                  let manifest = try? Manifest.decode(entry.manifest), manifest.fileSize == entry.size else { return nil }
            manifests.append(manifest)
        }
        let layout = ChunkLayout(manifests: manifests)
        guard layout.chunkCount >= known.chunkCount,
              layout.chunks(from: 0).prefix(known.chunkCount).elementsEqual(known.chunks(from: 0))
        else { return nil }
        return layout
    }

    /// Adds the index rows of the chunks a streamed manifest made known since the last
    /// record (and its root hash once it is whole), before chunks among them are marked
    /// verified. On the node's queue, within `recordTransfer`.
    func recordStreamedRows(_ transfer: IncomingTransfer, in store: any TransferStore) throws(IndexError) {
        let (layout, recorded, recordID, rootHash) = transfer.with { ($0.layout, $0.recordedRows, $0.recordID, $0.rootHash) }
        guard recorded < layout.chunkCount else { return }
        try store.addTransferChunks(transferID: recordID, chunks: layout.transferChunks(from: recorded),
                                    chunkCount: layout.chunkCount, rootHash: layout.isComplete ? rootHash : nil)
        transfer.with { $0.recordedRows = layout.chunkCount }
    }

    /// What a `hashedChunk` frame did to a streamed manifest, taken in one step of the lock.
    private enum HashedStep: Sendable {
        case ignored, known, completed(ChunkLayout), broken(String)
    }
}

extension ChunkLayout {
    /// The most chunks a streamed manifest of a file of `size` bytes may have: every chunk
    /// but the last is at least `minSize` (`extend`).
    static func mostChunks(streamedSize size: UInt64) -> Int {
        Int(clamping: size / UInt64(ChunkParameters.forFileSize(size).minSize) + 1)
    }

    /// Whether a file of `size` bytes may stream its manifest: however small its chunks,
    /// the whole manifest fits an offer entry (`WireLimits.maxManifest`, about 349,000
    /// chunks: files up to about 340 GB), so the transfer can always be offered again whole.
    static func mayStream(size: UInt64) -> Bool {
        let most = mostChunks(streamedSize: size)
        return size >= 1 && most <= (WireLimits.maxManifest - 48) / 36
    }
}
