internal import Foundation
internal import PeerWire

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
final class SessionFlow: @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`.

    /// The reader pauses while this many bytes wait to be sent (or are reserved by answers
    /// being prepared).
    static let highWater = 8 << 20
    /// The reader pauses while this many received frames are not handled yet.
    static let maxUnhandledFrames = 64
    /// ...or while their bytes reach this.
    static let maxUnhandledBytes = 16 << 20
    /// Bytes of block answers read from disk at once for one peer; more requests wait.
    static let serveBudget = 8 << 20

    private let condition = NSCondition()
    private var queued = 0
    private var reserved = 0
    private var unhandledFrames = 0
    private var unhandledBytes = 0
    private var cancelled = false
    /// Why sending failed, if it did (the send queue's error, for the session's close reason).
    private var sendFailure: String?
    /// Since when the reader waits for room (nil: it reads).
    private var pausedSince: ContinuousClock.Instant?
    /// Since when it waits because the peer does not read our answers (not because the
    /// node is slow to handle what the peer sent).
    private var stalledSince: ContinuousClock.Instant?
    /// When a write last completed: a peer that reads slowly is not stalled.
    private var lastSendProgress = ContinuousClock.now

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    // MARK: Sending

    /// Counts `bytes` as queued for sending.
    func queue(_ bytes: Int) {
        locked { queued += bytes }
    }

    /// `bytes` left the send queue (written, or dropped because the channel failed).
    func sent(_ bytes: Int, failure: String? = nil) {
        locked {
            queued -= bytes
            lastSendProgress = .now
            if let failure, sendFailure == nil { sendFailure = failure }
            condition.broadcast()
        }
    }

    /// A write to the peer completed, within a send that may go on (`SecureChannel.onWrite`):
    /// a peer reading a large answer slowly is not one that stopped reading.
    func wrote() {
        locked { lastSendProgress = .now }
    }

    /// Reserves `bytes` for an answer being prepared; false when the peer already has its
    /// budget's worth in preparation (the caller keeps the request for later). One answer is
    /// always allowed so a large block is never stuck.
    func reserve(_ bytes: Int) -> Bool {
        locked {
            guard reserved == 0 || reserved + bytes <= Self.serveBudget else { return false }
            reserved += bytes
            return true
        }
    }

    /// Releases a reservation (after its answer was queued, so `queued` already holds it).
    func release(_ bytes: Int) {
        locked {
            reserved -= bytes
            condition.broadcast()
        }
    }

    // MARK: Receiving

    /// Blocks the reader while the peer has too much waiting on our side; returns false once
    /// the session is cancelled.
    func waitForRoom() -> Bool {
        locked {
            while !cancelled && (isOutputFull || isInputFull) {
                if pausedSince == nil { pausedSince = .now }
                if !isOutputFull { stalledSince = nil } else if stalledSince == nil { stalledSince = .now }
                _ = condition.wait(until: Date().addingTimeInterval(0.1))
            }
            pausedSince = nil
            stalledSince = nil
            return !cancelled
        }
    }

    private var isOutputFull: Bool { queued + reserved >= Self.highWater }

    private var isInputFull: Bool {
        unhandledFrames >= Self.maxUnhandledFrames || unhandledBytes >= Self.maxUnhandledBytes
    }

    /// A frame of about `bytes` was read and handed to the node.
    func received(_ bytes: Int) {
        locked {
            unhandledFrames += 1
            unhandledBytes += bytes
        }
    }

    /// The node handled a frame counted by `received`.
    func handled(_ bytes: Int) {
        locked {
            unhandledFrames -= 1
            unhandledBytes -= bytes
            condition.broadcast()
        }
    }

    /// Wakes and stops a waiting reader for good (the session ended).
    func cancel() {
        locked {
            cancelled = true
            condition.broadcast()
        }
    }

    // MARK: Status

    /// Why the session must end, if flow control says so: sending failed, or the reader has
    /// been paused for `limit` because the peer does not read what we send, and not one of
    /// our writes completed meanwhile (a peer that reads slowly is only slowed down).
    func stallReason(pausedFor limit: Duration) -> String? {
        locked {
            if let sendFailure { return "cannot send to the peer: \(sendFailure)" }
            guard let stalledSince, ContinuousClock.now - max(stalledSince, lastSendProgress) >= limit else { return nil }
            return "the peer stopped reading what we send (\(queued + reserved) bytes waiting for \(limit))"
        }
    }

    /// Whether the reader is paused by back-pressure, whatever the cause (then silence from
    /// the peer is ours).
    var isPaused: Bool { locked { pausedSince != nil } }

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
        default: return 64
        }
    }
}
