#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import PeerNet

/// Sending: the accept, the window of chunks read on the transfer's `io` queue and put on
/// the wire, the acknowledgements, the pause and the end (on the node's queue).
extension TransferService {
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

    func acceptReceived(_ id: TransferID, have: [UInt8], from session: LinkSession) {
        guard let transfer = transfers.outgoing[id], transfer.peerKey == session.deviceKey else { return }
        let (state, listed) = transfer.with { ($0.shared.state, $0.hashedFrom ?? $0.layout.chunkCount) }
        // The bitmap covers the chunks the offer listed (a streamed manifest's come later).
        let haveSet = state == .offered ? ChunkBitmap.decode(have, count: listed) : nil
        let machine = OfferMachine(role: .send, id: id, peer: transfer.peer.name)
        carryOut(machine.handle(.acceptArrived(fits: haveSet != nil), in: state), on: transfer, have: haveSet, session: session)
    }

    /// The receiver holds `haveSet` already: the window starts from there, and sending.
    func startSending(_ transfer: OutgoingTransfer, have haveSet: Set<Int>, on session: LinkSession) {
        let id = transfer.id
        let layout = transfer.layout
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

    func ackReceived(_ id: TransferID, index chunk: Int, ok: Bool, from session: LinkSession) {
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
                if let due, due > now { OSThread.sleep(for: due - now) }
                do throws(FileError) {
                    let reader: ChunkReader
                    if let existing { reader = existing } else {
                        reader = try ChunkReader(path: sources[entry].path)
                        transfer.with { $0.readers[entry] = reader }
                    }
                    // A cheap check that the file is the one that was chunked catches edits made
                    // since; the hash of what is sent catches the rest (a resumed send trusts no
                    // manifest, an edit that kept the stamp or rotten bytes are never sent).
                    try sources[entry].checkUnchanged()
                    // Hashed, then encrypted straight from the page cache (a mapped window of the
                    // file), not copied out of it first; a file that shrank meanwhile throws here.
                    let sent: Bool? = try reader.withMappedBytes(at: chunk.offset, count: Int(chunk.size)) { bytes in
                        guard ChunkHash.of(bytes) == chunk.hash else { return false }
                        session.chunks.writeChunk(id: id, index: UInt32(index), hash: hash, bytes: bytes)
                        return true
                    }
                    if sent == false { throw Self.mismatch(chunk, in: sources[entry].path) }
                    if sent != nil { return }
                    // Where it cannot be mapped: read, hashed, and sent from the bytes hashed.
                    let bytes = try reader.bytes(of: chunk, verify: true)
                    bytes.withUnsafeBytes { session.chunks.writeChunk(id: id, index: UInt32(index), hash: hash, bytes: $0) }
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

    /// A chunk about to be sent that does not hash to what its manifest says.
    private static func mismatch(_ chunk: ChunkRef, in path: String) -> FileError {
        FileError(kind: .hashMismatch, operation: "read", path: path,
                  message: "the chunk at offset \(chunk.offset) no longer matches its hash")
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
}
