internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// Serving blocks to members, and the index quota of each member.
extension FolderService {
    // MARK: - Serving blocks

    /// Serves a member's block request on the folder's serve queue. At most
    /// `SessionFlow.serveBudget` bytes of answers are prepared at once per session; later
    /// requests wait here in order (and count as unhandled, so the reader stops reading the
    /// peer). The answer's bytes count in the session's flow until they are written.
    /// `behindParked`: requests of the session are parked already (on `queue`).
    func serveBlock(_ frame: Frame, from folder: SharedFolder, to session: LinkSession, behindParked: Bool) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let ask = BlockAsk(frame) else { return }
        if behindParked || !session.flow.reserve(Self.serveCost(ask)) {
            state.withLock { $0.parked[session.id, default: []].append((frame, folder)) }
            session.flow.received(0)
            return
        }
        startServe(frame, from: folder, to: session)
    }

    /// What an answer may hold in memory while it is prepared: a delta of a chunk read whole
    /// (a small one, or one whose file changed since it was indexed) holds the chunk and
    /// its answer (at most the chunk and a bitmap of 128 bytes).
    private static func serveCost(_ ask: BlockAsk) -> Int { ask.sums == nil ? Int(ask.size) + 64 : 2 * Int(ask.size) + 256 }

    /// Reads and sends one answer; its cost is already reserved.
    private func startServe(_ frame: Frame, from folder: SharedFolder, to session: LinkSession) {
        guard let ask = BlockAsk(frame) else { return }
        let request = ask.request
        let device = session.deviceKey
        folder.serveQueue.async { [self] in
            let refused: Bool
            if let sums = ask.sums, !BlockAsk.validSums(sums, size: ask.size) {
                // Not the sums of this block's 16 KiB blocks: nothing is read.
                session.frames.sendFromAnyThread([.blockResponse(request: request, ok: false, data: [])])
                refused = false
            } else {
                refused = serve(ask, from: folder, device: device, to: session)
            }
            // Queued: the send queue's count holds the answer from here.
            session.flow.release(Self.serveCost(ask))
            queue.async { [self] in
                if refused { blockRefused(to: session, folder: folder) }
                resumeServing(session)
            }
        }
    }

    /// Answers `ask` (on the folder's serve queue); true when it asked for something the
    /// folder does not share.
    private func serve(_ ask: BlockAsk, from folder: SharedFolder, device: String, to session: LinkSession) -> Bool {
        let request = ask.request
        var source = folder.blockSource(path: ask.path, offset: ask.offset, size: ask.size, hash: ask.hash)
        // Not in the index: maybe a chunk of a file we are still fetching, which we hold
        // (fan-out, `HeldChunks`): read from its temporary file and hashed first, and only
        // if the folder's rules let us serve it to this member now (they may have changed
        // since the request was read, or since the pull started).
        var held = false
        if case let .answer(answer) = source, answer == .notShared || answer == .unavailable, folder.held.isServing(ask.path),
           servesHeld(folder, to: device),
           let bytes = folder.heldBytes(path: ask.path, offset: ask.offset, size: ask.size, hash: ask.hash) {
            source = .answer(.data(bytes))
            held = true
        } else if case let .answer(answer) = source, answer == .notShared || answer == .unavailable, servesHeld(folder, to: device),
                  let growing = folder.growingSource(path: ask.path, offset: ask.offset, size: ask.size, hash: ask.hash) {
            source = growing   // a file a scan hashes now (`GrowingFiles`)
        }
        paceServing(folder, bytes: Int(ask.size))
        if let sums = ask.sums {
            serveDelta(ask, sums: sums, source: source, rehashed: held, from: folder, device: device, to: session)
            if case .answer(.notShared) = source { return true }
            return false
        }
        switch source {
        case let .file(reader, chunk):
            // Read from the file straight into the channel's buffer when the answer's turn
            // comes (A-share profile: the block array, the frame encoding and the plaintext
            // buffer were three copies of every served byte). The reader holds the file
            // open: a file replaced since is still read as indexed; one written in place
            // meanwhile gives bytes the asker's hash check refuses.
            folder.activity.served(to: device, bytes: Int(chunk.size))
            let file = reader.file
            session.frames.sendBlockFromAnyThread(request: request, count: Int(chunk.size)) { buffer, offset throws(FileError) in
                try file.read(at: chunk.offset + UInt64(offset), into: buffer)
            }
            return false
        case let .answer(.data(bytes)):
            folder.activity.served(to: device, bytes: bytes.count)
            session.frames.sendFromAnyThread([.blockResponse(request: request, ok: true, data: bytes)])
            return false
        case let .answer(answer):
            session.frames.sendFromAnyThread([.blockResponse(request: request, ok: false, data: [])])
            return answer == .notShared
        }
    }

    /// Answers a delta request: the bitmap and only the blocks whose sums differ from the
    /// asker's. Hashing the chunk is our cost, not the asker's (a request of 8 KiB can make
    /// us hash 16 MiB): past the session's `DeltaAllowance` a delta is answered unhashed,
    /// every block marked as differing, and then costs the asker the whole chunk on the
    /// wire, as a plain request does. A chunk of a file we are still fetching (`rehashed`)
    /// was hashed whole before it could be served: that hash is charged to the allowance
    /// too, before the comparison's, so a delta of it costs twice its size; once they do
    /// not fit, the answer is the whole chunk, and the asker pays for the hash on the wire.
    private func serveDelta(_ ask: BlockAsk, sums: [UInt8], source: SharedFolder.BlockSource, rehashed: Bool,
                            from folder: SharedFolder, device: String, to session: LinkSession) {
        let request = ask.request
        let size = Int(ask.size)
        // Taken only for a chunk we serve (after the checks of `blockSource`).
        var compare: Bool {
            (!rehashed || deltaAllowance.take(device: device, bytes: size)) && deltaAllowance.take(device: device, bytes: size)
        }
        let refuse = { session.frames.sendFromAnyThread([.blockResponse(request: request, ok: false, data: [])]) }
        switch source {
        case let .file(reader, chunk):
            // Summed piece by piece (1 MiB held, not the chunk).
            let differences: BlockDelta.Differences? = if compare {
                (try? BlockDelta.sums(of: chunk, in: reader)).flatMap { BlockDelta.differences(ours: $0, theirs: sums, size: size) }
            } else {
                .all(size: size)
            }
            guard let differences else { return refuse() }
            folder.activity.served(to: device, bytes: differences.answerSize)
            // Then the blocks are read from the file again: written in place between the two
            // reads, it gives bytes the asker's hash check refuses. A large answer is streamed
            // like a large block; a small one is read now, so that queued answers of a few
            // bytes never hold files open (see `blockSource`).
            let source = HandedOver(file: reader.file)
            guard differences.answerSize >= SharedFolder.streamedBlock else {
                var answer = [UInt8](repeating: 0, count: differences.answerSize)
                let read = answer.withUnsafeMutableBytes { buffer in (try? source.fill(buffer, 0, differences, chunk)) != nil }
                guard read else { return refuse() }
                return session.frames.sendFromAnyThread([.blockResponse(request: request, ok: true, data: answer)])
            }
            session.frames.sendBlockFromAnyThread(request: request, count: differences.answerSize) { buffer, offset throws(FileError) in
                try source.fill(buffer, offset, differences, chunk)
            }
        case let .answer(.data(bytes)):
            let answer = bytes.withUnsafeBytes { chunk -> [UInt8]? in
                let differences = compare ? BlockDelta.differences(ours: BlockDelta.sums(chunk), theirs: sums, size: size) : .all(size: size)
                return differences.map { BlockDelta.answer(chunk: chunk, $0) }
            }
            guard let answer else { return refuse() }
            folder.activity.served(to: device, bytes: answer.count)
            session.frames.sendFromAnyThread([.blockResponse(request: request, ok: true, data: answer)])
        case .answer:
            refuse()
        }
    }

    /// Whether the folder is still ours and `device` still one of its members (any thread):
    /// asked again when a chunk of a file we fetch is served, since the request may have
    /// waited (parked, or on the serve queue) while the folder was unshared or the member left.
    private func servesHeld(_ folder: SharedFolder, to device: String) -> Bool {
        state.withLock { $0.folders[folder.id] === folder } && isMember(device, of: folder.id)
    }

    /// Starts the waiting requests that fit the budget now.
    /// One turn of the lock when none waits (on `queue`).
    private func resumeServing(_ session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        while case let (first?, link) = state.withLock({ ($0.parked[session.id]?.first, $0.link) }) {
            let (frame, folder) = first
            guard link?.session(session.id) != nil else { return }
            guard let ask = BlockAsk(frame), session.flow.reserve(Self.serveCost(ask)) else { return }
            // (Only `queue` parks and takes: the first is still the one read.)
            state.withLock { _ = $0.parked[session.id]?.removeFirst() }
            session.flow.handled(0)
            startServe(frame, from: folder, to: session)
        }
    }
}

/// A block request or a block delta request, as served.
struct BlockAsk {
    let request: UInt32
    let path: String
    let offset: UInt64
    let size: UInt32
    let hash: [UInt8]
    /// The asker's block sums (a delta request), or nil.
    let sums: [UInt8]?

    init?(_ frame: Frame) {
        switch frame {
        case let .blockRequest(request, _, path, offset, size, hash):
            (self.request, self.path, self.offset, self.size, self.hash, sums) = (request, path, offset, size, hash, nil)
        case let .blockDeltaRequest(request, _, path, offset, size, hash, sums):
            (self.request, self.path, self.offset, self.size, self.hash, self.sums) = (request, path, offset, size, hash, sums)
        default:
            return nil
        }
    }

    /// Whether `sums` are one sum per block of a block of `size` bytes, and the answer (at
    /// most a bitmap and the whole block) fits in one frame.
    static func validSums(_ sums: [UInt8], size: UInt32) -> Bool {
        fitsDelta(Int(size)) && sums.count == BlockDelta.blockCount(size: Int(size)) * BlockDelta.sumSize
    }

    /// Whether a delta answer for a block of `size` bytes fits in one frame.
    static func fitsDelta(_ size: Int) -> Bool {
        size > 0 && size + BlockDelta.bitmapSize(size: size) <= WireLimits.maxChunk
    }
}

/// How much each member may make us hash for delta answers (`serveDelta`): a token bucket
/// of `capacity` bytes, refilled at `rate` bytes per second, per device (not per session: a
/// reconnection starts no new one; members are few, and their buckets are kept). An honest
/// peer asks deltas for the few chunks a change touched (C: 3–5 MiB); a peer that asks
/// again and again for deltas of large chunks gets whole chunks instead, unhashed, once it
/// has used it up.
final class DeltaAllowance: Sendable {
    static let capacity = 256 << 20
    static let rate = 64 << 20

    struct Bucket: Equatable {
        var tokens: Double
        var at: ContinuousClock.Instant

        /// Takes `bytes` if the bucket holds them at `now` (refilled since `at`).
        mutating func take(_ bytes: Int, now: ContinuousClock.Instant, capacity: Int, rate: Int) -> Bool {
            let elapsed = now - at
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            tokens = min(Double(capacity), tokens + max(0, seconds) * Double(rate))
            at = max(at, now)   // (instants read on other threads may come late)
            guard tokens >= Double(bytes) else { return false }
            tokens -= Double(bytes)
            return true
        }
    }

    private let buckets = Mutex<[String: Bucket]>([:])

    /// Whether `device` may make us hash `bytes` more now (any thread).
    func take(device: String, bytes: Int, now: ContinuousClock.Instant = .now) -> Bool {
        buckets.withLock { all in
            var bucket = all[device] ?? Bucket(tokens: Double(Self.capacity), at: now)
            defer { all[device] = bucket }
            return bucket.take(bytes, now: now, capacity: Self.capacity, rate: Self.rate)
        }
    }
}

/// A chunk's open file handed from the serve queue to the session's send queue: a value of
/// `OpenFile` (immutable: its descriptor, closed when the last reference goes), not the
/// serve queue's `ChunkReader`, whose buffer is its own.
private struct HandedOver: Sendable {
    let file: OpenFile

    /// Fills `buffer` with the bytes of a delta answer from `offset` on: its bitmap, and
    /// the differing blocks read from the file.
    func fill(_ buffer: UnsafeMutableRawBufferPointer, _ offset: Int, _ differences: BlockDelta.Differences,
              _ chunk: ChunkRef) throws(FileError) {
        try differences.fill(buffer, from: offset) { (start, part) throws(FileError) in
            try file.read(at: chunk.offset + UInt64(start), into: part)
        }
    }
}

// MARK: - Index quota

extension FolderService {
    /// The most index entries (tombstones included) stored for one peer in one folder:
    /// twice our own entries (a member may hold all we hold, and as much again that we have
    /// not pulled yet) plus `config.peerIndexAllowance` (a folder we just joined is empty
    /// here). Beyond it one member could grow the index on disk and the planner's memory
    /// without end (1,000,000 tombstones: 472 MB of index). "Our own" leaves out the
    /// tombstones we recorded for other devices' deletions: applying a member's flood of
    /// deletions must not raise that member's quota.
    func indexQuota(folderID: String) throws(IndexError) -> Int {
        2 * (try index.ownEntryCount(folderID: folderID, localDevice: localDevice)) + config.peerIndexAllowance
    }

    /// Whether storing entries of `paths` keeps the peer within its quota; if not, says so
    /// once per session (an error event and the folder's status, naming the peer) and the
    /// caller refuses the batch (no ack: an honest peer sends it again later). Once refused,
    /// the session's further pages of the folder are refused without counting: a flood past
    /// the quota costs no query per page.
    func withinIndexQuota(_ paths: Set<PathKey>, folder: SharedFolder, from session: LinkSession) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        let key = folder.id + "|" + session.deviceKey
        let (reported, past, allowance) = state.withLock {
            ($0.quotaReported[session.id]?.contains(folder.id) == true, $0.pastAllowance.contains(key), $0.config.peerIndexAllowance)
        }
        if reported { return false }
        // The quota is at least the allowance: while the peer's rows and this page fit in it,
        // nothing more is counted (B: two counts of the whole folder per page received). Once
        // they did not, the exact counts come at once (a folder past the allowance would
        // otherwise pay for both).
        let room = allowance - paths.count
        // (A count that fails here falls to the exact counts below, whose failure is said.)
        if room >= 0, !past,
           let stored = try? index.remoteFileCount(folderID: folder.id, deviceID: session.deviceKey, upTo: room + 1) {
            if stored <= room { return true }
            state.withLock { _ = $0.pastAllowance.insert(key) }
        }
        let after: Int
        let quota: Int
        do {
            let counts = try index.remoteFileCounts(folderID: folder.id, deviceID: session.deviceKey, paths: paths.map(\.string))
            after = counts.stored + paths.count - counts.existing
            quota = try indexQuota(folderID: folder.id)
        } catch {
            emitError(session.peer, "folder \(folder.label): cannot check \(session.peer.name)'s index quota: \(error)")
            return false
        }
        guard after > quota else { return true }
        if state.withLock({ $0.quotaReported[session.id, default: []].insert(folder.id).inserted }) {
            let message = "folder \(folder.label): \(session.peer.name) (\(session.peer.id)) sent more index entries than it may "
                + "store (\(after) > \(quota): twice ours plus \(allowance)); its further entries are refused"
            emitError(session.peer, message)
            folder.setError(message)
        }
        return false
    }
}
