internal import FoundationEssentials
internal import PeerModel
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// Flow control of one session, shared by the node's queue, the session's reader thread,
/// its send queue and the folder serve queues: how many bytes wait to be sent, how many
/// bytes of block answers are being read from disk, and how many received frames the node
/// has not handled yet.
///
/// It bounds what a peer can make us hold for it. The reader stops reading the peer's frames
/// (back-pressure: TCP then stops the peer) while we hold too much for it: answers it does
/// not read, requests we have not handled. A peer that only sends requests and never reads
/// our answers therefore costs a bounded amount of memory, and the dead-peer timer or the
/// socket's send timeout ends the session with a reason that says so.
///
/// Two locks, always taken in this order: `condition` (the reader's waiting) → `counts` (the
/// numbers). The reader checks for room and waits under `condition`; what can make room
/// (bytes sent, a reservation released, a frame handled, cancel) changes the counts and
/// broadcasts under `condition` too, so the reader never misses it. What only takes room
/// (queue, reserve, received) or notes progress (wrote) takes `counts` alone: it cannot end
/// a wait.
final class SessionFlow: Sendable {
    /// The reader pauses while this many bytes wait to be sent (or are reserved by answers
    /// being prepared).
    static let highWater = 8 << 20
    /// The reader pauses while this many received frames are not handled yet.
    static let maxUnhandledFrames = 64
    /// ...or while their bytes reach this.
    static let maxUnhandledBytes = 16 << 20
    /// Bytes of block answers read from disk at once for one peer; more requests wait.
    static let serveBudget = 8 << 20

    struct Counts {
        var queued = 0
        var reserved = 0
        var unhandledFrames = 0
        var unhandledBytes = 0
        var cancelled = false
        /// Why sending failed, if it did (the send queue's error, for the session's close reason).
        var sendFailure: String?
        /// Since when the reader waits for room (nil: it reads).
        var pausedSince: ContinuousClock.Instant?
        /// Since when it waits because the peer does not read our answers (not because the
        /// node is slow to handle what the peer sent).
        var stalledSince: ContinuousClock.Instant?
        /// When a write last completed: a peer that reads slowly is not stalled.
        var lastSendProgress = ContinuousClock.now

        var isOutputFull: Bool { queued + reserved >= SessionFlow.highWater }

        var isInputFull: Bool {
            unhandledFrames >= SessionFlow.maxUnhandledFrames || unhandledBytes >= SessionFlow.maxUnhandledBytes
        }
    }

    /// Only for the reader's waiting (`waitForRoom`) and the broadcasts that end it.
    private let condition = OSCondition()
    private let counts = Mutex(Counts())

    /// Changes the counts in a way that may make room, and wakes the reader to look.
    private func makingRoom(_ body: (inout Counts) -> Void) {
        condition.lock()
        defer { condition.unlock() }
        counts.withLock { body(&$0) }
        condition.broadcast()
    }

    // MARK: Sending

    /// Counts `bytes` as queued for sending.
    func queue(_ bytes: Int) {
        counts.withLock { $0.queued += bytes }
    }

    /// `bytes` left the send queue (written, or dropped because the channel failed).
    func sent(_ bytes: Int, failure: String? = nil) {
        let now = ContinuousClock.now
        makingRoom {
            $0.queued -= bytes
            $0.lastSendProgress = now
            if let failure, $0.sendFailure == nil { $0.sendFailure = failure }
        }
    }

    /// A write to the peer completed, within a send that may go on (`SecureChannel.onWrite`):
    /// a peer reading a large answer slowly is not one that stopped reading.
    func wrote() {
        let now = ContinuousClock.now
        counts.withLock { $0.lastSendProgress = now }
    }

    /// Reserves `bytes` for an answer being prepared; false when the peer already has its
    /// budget's worth in preparation (the caller keeps the request for later). One answer is
    /// always allowed so a large block is never stuck.
    func reserve(_ bytes: Int) -> Bool {
        counts.withLock {
            guard $0.reserved == 0 || $0.reserved + bytes <= Self.serveBudget else { return false }
            $0.reserved += bytes
            return true
        }
    }

    /// Releases a reservation (after its answer was queued, so `queued` already holds it).
    func release(_ bytes: Int) {
        makingRoom { $0.reserved -= bytes }
    }

    // MARK: Receiving

    /// Blocks the reader while the peer has too much waiting on our side; returns false once
    /// the session is cancelled.
    func waitForRoom() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while counts.withLock({ Self.mustWait(&$0) }) {
            condition.wait(for: .milliseconds(100))
        }
        return counts.withLock { counts in
            counts.pausedSince = nil
            counts.stalledSince = nil
            return !counts.cancelled
        }
    }

    /// Whether the reader must wait (noting since when, and why).
    private static func mustWait(_ counts: inout Counts) -> Bool {
        guard !counts.cancelled && (counts.isOutputFull || counts.isInputFull) else { return false }
        let now = ContinuousClock.now
        if counts.pausedSince == nil { counts.pausedSince = now }
        if !counts.isOutputFull { counts.stalledSince = nil } else if counts.stalledSince == nil { counts.stalledSince = now }
        return true
    }

    /// A frame of about `bytes` was read and handed to the node.
    func received(_ bytes: Int) {
        counts.withLock {
            $0.unhandledFrames += 1
            $0.unhandledBytes += bytes
        }
    }

    /// The node handled a frame counted by `received`.
    func handled(_ bytes: Int) {
        makingRoom {
            $0.unhandledFrames -= 1
            $0.unhandledBytes -= bytes
        }
    }

    /// Wakes and stops a waiting reader for good (the session ended).
    func cancel() {
        makingRoom { $0.cancelled = true }
    }

    // MARK: Status

    /// Why the session must end, if flow control says so: sending failed, or the reader has
    /// been paused for `limit` because the peer does not read what we send, and not one of
    /// our writes completed meanwhile (a peer that reads slowly is only slowed down).
    func stallReason(pausedFor limit: Duration) -> String? {
        let now = ContinuousClock.now
        return counts.withLock { counts in
            if let sendFailure = counts.sendFailure { return "cannot send to the peer: \(sendFailure)" }
            guard let stalledSince = counts.stalledSince, now - max(stalledSince, counts.lastSendProgress) >= limit else { return nil }
            return "the peer stopped reading what we send (\(counts.queued + counts.reserved) bytes waiting for \(limit))"
        }
    }

    /// When `stallReason(pausedFor: limit)` will say the peer stopped reading if nothing
    /// changes meanwhile (nil: the reader is not waiting for the peer to read).
    func stallDue(pausedFor limit: Duration) -> ContinuousClock.Instant? {
        counts.withLock { counts in counts.stalledSince.map { max($0, counts.lastSendProgress) + limit } }
    }

    /// Whether the reader is paused by back-pressure, whatever the cause (then silence from
    /// the peer is ours).
    var isPaused: Bool { counts.withLock { $0.pausedSince != nil } }

    /// About how many bytes `frames` take on the wire: what flow control counts (exact
    /// enough for the bulky ones: block data, index entries, messages).
    static func size(of frames: [Frame]) -> Int {
        frames.reduce(0) { total, frame in total + size(of: frame) }
    }

    static func size(of frame: Frame) -> Int {
        switch frame {
        case let .blockResponse(_, _, data): return 32 + data.count
        case let .chunk(_, _, data), let .hashedChunk(_, _, _, data): return 64 + data.count
        case let .indexUpdate(_, _, entries):
            return 64 + entries.reduce(0) { $0 + 128 + $1.path.utf8.count + $1.manifest.count + $1.version.count * 48 }
        case let .message(_, body): return 32 + body.count
        case let .offer(offer): return 4096 + offer.entries.reduce(0) { $0 + 128 + $1.manifest.count }
        case let .streamData(_, bytes): return 32 + bytes.count
        case let .indexBlocks(_, blocks):
            // Each block with its array's overhead (as `SharedFolder.heldCost`): frames of tiny
            // blocks count for what they take too.
            return 32 + SharedFolder.heldCost(of: blocks)
        case let .folderSelection(_, paths): return 64 + paths.reduce(0) { $0 + 32 + $1.utf8.count }
        case let .chunkHave(_, path, _, _, bitmap): return 128 + path.utf8.count + bitmap.count
        case let .growingFile(_, path, _, _, _, chunks): return 128 + path.utf8.count + chunks.count * 72
        default: return 64
        }
    }
}
