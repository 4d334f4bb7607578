internal import Synchronization
internal import Dispatch
internal import Foundation
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// The transfers a node is running (a value held by `TransferService`, on its queue).
struct TransferTable {
    var outgoing: [TransferID: OutgoingTransfer] = [:]
    var incoming: [TransferID: IncomingTransfer] = [:]
    /// `syncpeer receive` clients waiting for the next offer (directory, or nil for the
    /// offer's recorded or default folder).
    var receiveWaiters: [ReceiveWaiter] = []
    /// Offers declined for a peer's bounds, per session (TransferService+Bounds).
    var refusedOffers: [UInt64: Int] = [:]
}

/// A client of the control socket following one transfer: progress events, then the end.
struct TransferObserver: Sendable {
    let progress: @Sendable (NodeEvent) -> Void
    let completion: @Sendable (Result<TransferInfo, EngineError>) -> Void
}

/// A `syncpeer receive` waiting for the next offer.
struct ReceiveWaiter: Sendable {
    let directory: String?
    let accept: Bool
    let observer: TransferObserver
}

/// What both directions share: identity, peer, progress and observers.
class TransferBase: @unchecked Sendable {
    // @unchecked: fields are confined to the node's queue, except those documented as
    // touched only on `io` (readers, partial files), which only `io` closures use.
    let id: TransferID
    let peerKey: String
    let peer: PeerRef
    let name: String
    let totalSize: Int64
    let fileCount: Int
    var sessionID: UInt64?
    /// Changed only through `move(to:)`.
    private(set) var state: TransferState
    /// Blocking file I/O for this transfer runs here, never on the node's queue.
    let io: DispatchQueue
    var meter = RateMeter()
    var lastEmit: ContinuousClock.Instant = .now - .seconds(1)
    var observers: [TransferObserver] = []
    /// The last index write of this transfer that failed (nil once one succeeds): shown as
    /// the reason of its events, since resume depends on the record.
    var recordFailure: String?
    /// Why it is paused (shown by `transfers` while it is): a lost link, an offline peer.
    var pauseReason: String?
    let started = ContinuousClock.now
    /// When it started, unix ms: its place in `transfers` (newest first).
    let startedAt = Int64((Date().timeIntervalSince1970 * 1000).rounded())
    /// Foundation progress in bytes for the whole transfer, and one per file. The files' are
    /// not children of the whole: Foundation adds children's fractions exactly, with
    /// denominators multiplied together, and traps on the overflow once a folder has a few
    /// hundred files of different sizes. `advance`/`setHeld` keep both in step instead.
    let progress: Progress
    /// Made when the first bytes are counted: an offer waiting for an answer does not hold
    /// one object per file (a few hundred bytes each, 100,000 for a large folder).
    private lazy var fileProgress: [Progress] = fileSizes.map { Progress(totalUnitCount: max(1, $0)) }
    private let fileSizes: [Int64]

    init(id: TransferID, peerKey: String, peer: PeerRef, name: String, sizes: [Int64], state: TransferState) {
        self.id = id
        self.peerKey = peerKey
        self.peer = peer
        self.name = name
        self.totalSize = sizes.reduce(0, +)
        self.fileCount = sizes.count
        self.state = state
        self.io = DispatchQueue(label: "syncpeer.transfer.\(id.description.prefix(8))")
        progress = Progress(totalUnitCount: sizes.reduce(0) { $0 + max(1, $1) })
        fileSizes = sizes
    }

    /// Counts `bytes` more of file `entry` as done (and of the whole transfer).
    func advance(entry: Int, by bytes: Int64) {
        fileProgress[entry].completedUnitCount += bytes
        progress.completedUnitCount += bytes
    }

    /// Sets how many bytes of file `entry` are held (a resumed transfer's starting point).
    func setHeld(entry: Int, _ bytes: Int64) {
        progress.completedUnitCount += bytes - fileProgress[entry].completedUnitCount
        fileProgress[entry].completedUnitCount = bytes
    }

    var isFinished: Bool { state.isFinished }

    /// Moves to `next` when `TransferState.allows` the step; returns whether it did. A
    /// finished transfer never moves again (a late frame cannot revive it).
    @discardableResult
    func move(to next: TransferState) -> Bool {
        guard state == next || state.allows(next) else { return false }
        state = next
        return true
    }

    func elapsedSeconds() -> Double {
        let d = ContinuousClock.now - started
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// Sending one offer to one peer.
final class OutgoingTransfer: TransferBase, @unchecked Sendable {
    /// The offer; with a streamed manifest, the one sent first (without the manifest) until
    /// the file is hashed, then the whole one (what any later offer sends).
    var prepared: PreparedOffer
    /// The chunks known so far, numbered as the wire counts them (all of them unless the
    /// manifest streams and the file is still being hashed).
    var layout: ChunkLayout
    /// While the manifest streams: the hashing of the file, stopped when the transfer ends.
    var hashing: HashingJob?
    /// The chunks from this index on go as `hashedChunk` frames: those the offer now on the
    /// wire left out (nil when it had every manifest).
    var hashedFrom: Int?
    /// An offer came while the file was being hashed (a link back, a `resume`): offered once
    /// it is hashed.
    var offerWhenHashed = false
    var window: SendWindow?
    /// A spooled standard input, deleted when the transfer ends.
    let spoolFile: String?
    /// Its session lost to a duplicate: offered again on the session kept, not paused.
    var awaitingSuccessor = false
    /// Chunks put on the wire at least once, in any attempt.
    var everSent = ChunkSet()
    /// Bytes of chunks put on the wire more than once (`TransferService+Resent`); nil until
    /// the first accept.
    var resentBytes: Int64?
    /// Chunk readers per entry (touched only on `io`).
    var readers: [Int: ChunkReader] = [:]
    /// With a send rate: when pacing began and the bytes sent since (touched only on `io`).
    var pacing: (start: ContinuousClock.Instant, bytes: Int64)?

    init(prepared: PreparedOffer, peerKey: String, peer: PeerRef, spoolFile: String?) {
        self.prepared = prepared
        self.layout = prepared.layout
        self.spoolFile = spoolFile
        super.init(id: prepared.offer.id, peerKey: peerKey, peer: peer, name: prepared.offer.name,
                   sizes: prepared.offer.entries.map { Int64($0.size) }, state: .offered)
    }

    /// Bytes the receiver confirmed in an earlier attempt (shown while offering again).
    var heldBefore: Int64 = 0

    var confirmedBytes: Int64 { window.map { Int64($0.confirmedBytes) } ?? heldBefore }
}

/// Receiving one offer from one peer.
final class IncomingTransfer: TransferBase, @unchecked Sendable {
    /// The offer as received, without its encoded manifests (`layout` holds them decoded):
    /// an offer waiting for an answer holds one copy of its manifests, not two.
    let offer: TransferOffer
    /// About what the offer holds while it waits for an answer (`TransferService.heldBytes`).
    let heldBytes: Int
    /// The chunks known so far (an offer whose manifests stream learns them chunk by chunk).
    var layout: ChunkLayout
    /// Names the content (`PreparedOffer.contentHash`); `TransferRecord.unknownRootHash`
    /// until a streamed manifest is complete.
    var rootHash: [UInt8]
    /// Chunk rows the index holds for this transfer, 0 ..< count (a streamed manifest's are
    /// added as chunks become known, before they are marked verified).
    var recordedRows = 0
    /// Validated relative paths of the entries (folders).
    let paths: [SafePath]
    /// The directory the offer is received into, once accepted.
    var directory: String?
    var verified: Set<Int> = []
    var verifiedBytes: Int64 = 0
    /// Verified chunks not yet recorded in the index (recorded in batches).
    var unrecorded: [Int] = []
    var lastRecord: ContinuousClock.Instant = .now
    /// Where each batch of verified chunks is made durable (`DataSync`) before it is
    /// recorded: serial, so batches are recorded in order, and off `io`, which goes on
    /// writing meanwhile.
    let durability: DispatchQueue
    /// A batch is being made durable and recorded: the next waits for it (one at a time, so
    /// a slow disk makes batches larger, never a queue of syncs); `recordForced` remembers
    /// a forced record asked for meanwhile.
    var recording = false
    var recordForced = false
    /// Files being written (touched only on `io`).
    var partials: [Int: PartialFile] = [:]
    var tree: DirectoryHandle?
    var target: DirectoryHandle?
    /// Resumed from an earlier, accepted attempt (no new decision needed).
    var resumed = false
    var completing = false
    /// An unfinished earlier transfer of a file with the same name from the same peer whose
    /// content has since changed: its verified chunks are copied instead of sent again.
    var supersedes: TransferRecord?
    /// Chunk bytes that arrived but were not needed (already held, or failed verification).
    var duplicateBytes: Int64 = 0
    /// The sender's "re-sent" figure for the current attempt (`TransferService+Resent`), and
    /// the chunk bytes that failed verification since it came; nil from a sender that does
    /// not announce it.
    var announcedResent: Int64?
    var attemptDuplicates: Int64 = 0
    /// Bytes re-sent as this end can tell.
    var resentBytes: Int64 { announcedResent.map { $0 + attemptDuplicates } ?? duplicateBytes }
    /// Chunks that failed verification; a sender that keeps lying is cut off.
    var badChunks = 0
    /// The index record (and partial file names) of this transfer: the offer's ID, or the
    /// ID of the earlier attempt it resumes.
    var recordID: String
    /// Where the file or folder was put.
    var finalPath: String?

    init(offer: TransferOffer, layout: ChunkLayout, rootHash: [UInt8], paths: [SafePath], peerKey: String, peer: PeerRef) {
        var kept = offer
        for index in kept.entries.indices { kept.entries[index].manifest = [] }
        self.offer = kept
        self.heldBytes = TransferService.heldBytes(of: offer)
        self.layout = layout
        self.rootHash = rootHash
        self.paths = paths
        self.recordID = offer.id.description
        self.durability = DispatchQueue(label: "syncpeer.transfer.\(offer.id.description.prefix(8)).sync")
        super.init(id: offer.id, peerKey: peerKey, peer: peer, name: offer.name,
                   sizes: offer.entries.map { Int64($0.size) }, state: .offered)
    }

    /// The name of the staging tree of a folder offer.
    var treeName: String { id.description + ".tree" }
}

/// A file being hashed for a streamed manifest, on a thread of its own. `stop()` (any
/// thread) ends it at its next chunk.
final class HashingJob: Sendable {
    private let stopped = Mutex(false)

    func stop() { stopped.withLock { $0 = true } }
    var isStopped: Bool { stopped.withLock { $0 } }
}
