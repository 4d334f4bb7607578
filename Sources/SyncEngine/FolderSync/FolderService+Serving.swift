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

    /// What an answer may hold in memory while it is prepared: a delta (its chunk read whole,
    /// to be hashed) holds the chunk and its answer (at most the chunk and a bitmap of 128 bytes).
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
        // A delta's chunk is read whole now: its sums and its answer come from the bytes hashed.
        var source = folder.blockSource(path: ask.path, offset: ask.offset, size: ask.size, hash: ask.hash, streamed: ask.sums == nil)
        // Not in the index: maybe a chunk of a file we are still fetching, which we hold
        // (fan-out, `HeldChunks`): read from its temporary file and hashed first, and only
        // if the folder's rules let us serve it to this member now (they may have changed
        // since the request was read, or since the pull started).
        if case let .answer(answer) = source, answer == .notShared || answer == .unavailable, folder.held.isServing(ask.path),
           servesHeld(folder, to: device),
           let bytes = folder.heldBytes(path: ask.path, offset: ask.offset, size: ask.size, hash: ask.hash) {
            source = .answer(.data(bytes))
        } else if case let .answer(answer) = source, answer == .notShared || answer == .unavailable, servesHeld(folder, to: device),
                  let growing = folder.growingSource(path: ask.path, offset: ask.offset, size: ask.size, hash: ask.hash,
                                                     streamed: ask.sums == nil) {
            source = growing   // a file a scan hashes now (`GrowingFiles`)
        }
        paceServing(folder, bytes: Int(ask.size))
        if let sums = ask.sums {
            serveDelta(ask, sums: sums, source: source, from: folder, device: device, to: session)
            if case .answer(.notShared) = source { return true }
            return false
        }
        switch source {
        case let .file(reader, chunk, indexed):
            // Read from the file into the session's buffer when the answer's turn comes,
            // hashed there, and encrypted straight from it (A-share profile: the block array,
            // the frame encoding and the plaintext buffer were three copies of every served
            // byte; now one). The reader holds the file open: a file replaced since is still
            // read as indexed; bytes that no longer hash right (written in place meanwhile,
            // or rotten) are refused, never sent.
            folder.activity.served(to: device, bytes: Int(chunk.size))
            let file = reader.file
            let path = ask.path
            session.frames.sendBlockFromAnyThread(request: request, count: Int(chunk.size)) { buffer throws(FileError) in
                do throws(FileError) {
                    try ChunkReader.readVerified(chunk, from: file, into: buffer)
                } catch {
                    if error.kind == .hashMismatch { folder.servedMismatch(path: path, offset: chunk.offset, indexed: indexed, file: file.fd) }
                    throw error
                }
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
    /// asker's, cut from the chunk's bytes as read and hashed whole (`blockSource` with
    /// `streamed: false`; a chunk of a file we are still fetching is hashed whole too), so
    /// every byte of the answer was verified. Hashing the chunk is our cost, not the asker's
    /// (a request of 8 KiB can make us hash 16 MiB twice, to verify it and to sum it): both
    /// are charged to the session's `DeltaAllowance`; past it a delta is answered with every
    /// block marked as differing, and then costs the asker the whole chunk on the wire, as a
    /// plain request does.
    private func serveDelta(_ ask: BlockAsk, sums: [UInt8], source: SharedFolder.BlockSource,
                            from folder: SharedFolder, device: String, to session: LinkSession) {
        let request = ask.request
        let size = Int(ask.size)
        // Taken only for a chunk we serve (after the checks of `blockSource`): its hash, done
        // already, then the comparison, if the hash fit.
        var compare: Bool { deltaAllowance.take(device: device, bytes: size) && deltaAllowance.take(device: device, bytes: size) }
        let refuse = { session.frames.sendFromAnyThread([.blockResponse(request: request, ok: false, data: [])]) }
        guard case let .answer(.data(bytes)) = source else { return refuse() }
        let answer = bytes.withUnsafeBytes { chunk -> [UInt8]? in
            let differences = compare ? BlockDelta.differences(ours: BlockDelta.sums(chunk), theirs: sums, size: size) : .all(size: size)
            return differences.map { BlockDelta.answer(chunk: chunk, $0) }
        }
        guard let answer else { return refuse() }
        folder.activity.served(to: device, bytes: answer.count)
        session.frames.sendFromAnyThread([.blockResponse(request: request, ok: true, data: answer)])
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
        // Room left from an earlier count (`QuotaHeadroom`): no count for this page.
        if state.withLock({ $0.quotaHeadroom.take(paths.count, key: key) }) { return true }
        // The quota is at least the allowance: while the peer's rows and this page fit in it,
        // nothing more is counted (B: two counts of the whole folder per page received). Once
        // they did not, the exact counts come at once (a folder past the allowance would
        // otherwise pay for both).
        let room = allowance - paths.count
        // (A count that fails here falls to the exact counts below, whose failure is said.)
        if room >= 0, !past,
           let stored = try? index.remoteFileCount(folderID: folder.id, deviceID: session.deviceKey, upTo: room + 1) {
            if stored <= room {
                state.withLock { $0.quotaHeadroom.counted(key: key, stored: stored + paths.count, quota: allowance, cap: allowance) }
                return true
            }
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
        guard after > quota else {
            state.withLock { $0.quotaHeadroom.counted(key: key, stored: after, quota: quota, cap: allowance) }
            return true
        }
        if state.withLock({ $0.quotaReported[session.id, default: []].insert(folder.id).inserted }) {
            let message = "folder \(folder.label): \(session.peer.name) (\(session.peer.id)) sent more index entries than it may "
                + "store (\(after) > \(quota): twice ours plus \(allowance)); its further entries are refused"
            emitError(session.peer, message)
            folder.setError(message)
        }
        return false
    }
}
