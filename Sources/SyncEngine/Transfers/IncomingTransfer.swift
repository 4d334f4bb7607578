internal import Synchronization
internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// Receiving one offer from one peer. Its mutable fields are in `fields`, one lock: the
/// node's queue, the transfer's `io` queue (the open files) and its `durability` queue
/// reach them so.
final class IncomingTransfer: LockedTransfer {
    let identity: TransferIdentity
    /// The offer as received, without its encoded manifests (`layout` holds them decoded):
    /// an offer waiting for an answer holds one copy of its manifests, not two.
    let offer: TransferOffer
    /// About what the offer holds while it waits for an answer (`TransferService.heldBytes`).
    let heldBytes: Int
    /// Validated relative paths of the entries (folders).
    let paths: [SafePath]
    /// Where each batch of verified chunks is made durable (`DataSync`) before it is
    /// recorded: serial, so batches are recorded in order, and off `io`, which goes on
    /// writing meanwhile.
    let durability: DispatchQueue

    struct Fields: TransferFields {
        var shared: TransferShared
        /// The chunks known so far (an offer whose manifests stream learns them chunk by chunk).
        var layout: ChunkLayout
        /// Names the content (`PreparedOffer.contentHash`); `TransferRecord.unknownRootHash`
        /// until a streamed manifest is complete.
        var rootHash: [UInt8]
        /// Chunk rows the index holds for this transfer, 0 ..< count (a streamed manifest's
        /// are added as chunks become known, before they are marked verified).
        var recordedRows = 0
        /// The directory the offer is received into, once accepted.
        var directory: String?
        var verified: Set<Int> = []
        var verifiedBytes: Int64 = 0
        /// Verified chunks not yet recorded in the index (recorded in batches).
        var unrecorded: [Int] = []
        var lastRecord: ContinuousClock.Instant = .now
        /// A batch is being made durable and recorded: the next waits for it (one at a time,
        /// so a slow disk makes batches larger, never a queue of syncs); `recordForced`
        /// remembers a forced record asked for meanwhile.
        var recording = false
        var recordForced = false
        /// Files being written (used only on `io`).
        var partials: [Int: PartialFile] = [:]
        var tree: DirectoryHandle?
        var target: DirectoryHandle?
        /// Resumed from an earlier, accepted attempt (no new decision needed).
        var resumed = false
        var completing = false
        /// An unfinished earlier transfer of a file with the same name from the same peer
        /// whose content has since changed: its verified chunks are copied instead of sent again.
        var supersedes: TransferRecord?
        /// Chunk bytes that arrived but were not needed (already held, or failed verification).
        var duplicateBytes: Int64 = 0
        /// The sender's "re-sent" figure for the current attempt (`TransferService+Resent`),
        /// and the chunk bytes that failed verification since it came; nil from a sender
        /// that does not announce it.
        var announcedResent: Int64?
        var attemptDuplicates: Int64 = 0
        /// Chunks that failed verification; a sender that keeps lying is cut off.
        var badChunks = 0
        /// The index record (and partial file names) of this transfer: the offer's ID, or
        /// the ID of the earlier attempt it resumes.
        var recordID: String
        /// Where the file or folder was put.
        var finalPath: String?

        /// Bytes re-sent as this end can tell.
        var resentBytes: Int64 { announcedResent.map { $0 + attemptDuplicates } ?? duplicateBytes }
        var progress: TransferProgress {
            TransferProgress(direction: .receive, done: verifiedBytes, resent: resentBytes, path: finalPath)
        }
    }
    let fields: Mutex<Fields>

    init(offer: TransferOffer, layout: ChunkLayout, rootHash: [UInt8], paths: [SafePath], peerKey: String, peer: PeerRef) {
        var kept = offer
        for index in kept.entries.indices { kept.entries[index].manifest = [] }
        identity = TransferIdentity(offer, peerKey: peerKey, peer: peer)
        self.offer = kept
        heldBytes = TransferService.heldBytes(of: offer)
        self.paths = paths
        durability = DispatchQueue(label: "syncpeer.transfer.\(offer.id.description.prefix(8)).sync")
        fields = Mutex(Fields(shared: TransferShared(state: .offered), layout: layout, rootHash: rootHash,
                              recordID: offer.id.description))
    }

    func with<R: Sendable>(_ body: (inout Fields) -> R) -> R {
        fields.withLock { body(&$0) }
    }

    // Single fields, one lock each (not for the per-chunk paths, which take `with` once).
    var layout: ChunkLayout { with { $0.layout } }
    var rootHash: [UInt8] { with { $0.rootHash } }
    var directory: String? { with { $0.directory } }
    var verified: Set<Int> { with { $0.verified } }
    var verifiedBytes: Int64 { with { $0.verifiedBytes } }
    var resumed: Bool { with { $0.resumed } }
    var completing: Bool { with { $0.completing } }
    var recordID: String { with { $0.recordID } }
    var target: DirectoryHandle? { with { $0.target } }
}
