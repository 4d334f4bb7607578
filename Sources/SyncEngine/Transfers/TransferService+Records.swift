internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// Index writes of transfers. Resume after a restart depends on these records, so a failed
/// write is never silent: one path reports it as an `error` event naming the transfer and
/// what was not recorded, and marks the transfer (its events carry the failure as `reason`
/// until a later write succeeds). Runs on the node's queue.
extension TransferService {
    /// Runs `write` against the index for a running transfer; returns whether it worked.
    @discardableResult
    func recordTransfer(_ transfer: any TransferBase, _ what: String,
                        _ write: (any TransferStore) throws(IndexError) -> Void) -> Bool {
        do throws(IndexError) {
            try write(store)
            transfer.recordFailure = nil
            return true
        } catch {
            let reason = Self.recordFailure(what, name: transfer.name, id: transfer.id.description, error)
            transfer.recordFailure = reason
            emitError(transfer.peer, reason)
            return false
        }
    }

    /// Runs `write` for a transfer that is only a record (not running); a failure is reported.
    @discardableResult
    func recordTransfer(_ record: TransferRecord, _ what: String,
                        _ write: (any TransferStore) throws(IndexError) -> Void) -> Bool {
        do throws(IndexError) {
            try write(store)
            return true
        } catch {
            emitError(nil, Self.recordFailure(what, name: record.name, id: record.id, error))
            return false
        }
    }

    static func recordFailure(_ what: String, name: String, id: String, _ error: IndexError) -> String {
        "cannot record \(what) of transfer \(name) (\(id.prefix(8))) in the index: \(error.description)"
    }
}

/// The receiver's records: the transfer's row once accepted, its verified chunks in durable batches.
extension TransferService {
    func recordIncoming(_ transfer: IncomingTransfer, directory: String) {
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
}
