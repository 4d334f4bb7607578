internal import Synchronization
internal import Dispatch
internal import PeerFiles
internal import PeerWire

/// Sending one offer to one peer. Its mutable fields are in `fields`, one lock: the node's
/// queue and the transfer's `io` queue (the readers and the pacing) both reach them so.
final class OutgoingTransfer: LockedTransfer {
    let identity: TransferIdentity
    /// A spooled standard input, deleted when the transfer ends.
    let spoolFile: String?

    struct Fields: TransferFields {
        var shared: TransferShared
        /// The offer; with a streamed manifest, the one sent first (without the manifest)
        /// until the file is hashed, then the whole one (what any later offer sends).
        var prepared: PreparedOffer
        /// The chunks known so far, numbered as the wire counts them (all of them unless the
        /// manifest streams and the file is still being hashed).
        var layout: ChunkLayout
        /// While the manifest streams: the hashing of the file, stopped when the transfer ends.
        var hashing: HashingJob?
        /// The chunks from this index on go as `hashedChunk` frames: those the offer now on
        /// the wire left out (nil when it had every manifest).
        var hashedFrom: Int?
        /// An offer came while the file was being hashed (a link back, a `resume`): offered
        /// once it is hashed.
        var offerWhenHashed = false
        var window: SendWindow?
        /// Its session lost to a duplicate: offered again on the session kept, not paused.
        var awaitingSuccessor = false
        /// Chunks put on the wire at least once, in any attempt.
        var everSent = ChunkSet()
        /// Bytes of chunks put on the wire more than once (`TransferService+Resent`); nil
        /// until the first accept.
        var resentBytes: Int64?
        /// Bytes the receiver confirmed in an earlier attempt (shown while offering again).
        var heldBefore: Int64 = 0
        /// Chunk readers per entry (used only on `io`).
        var readers: [Int: ChunkReader] = [:]
        /// With a send rate: when pacing began and the bytes sent since (used only on `io`).
        var pacing: (start: ContinuousClock.Instant, bytes: Int64)?

        var confirmedBytes: Int64 { window.map { Int64($0.confirmedBytes) } ?? heldBefore }
        var progress: TransferProgress { TransferProgress(direction: .send, done: confirmedBytes, resent: resentBytes, path: nil) }
    }
    let fields: Mutex<Fields>

    init(prepared: PreparedOffer, peerKey: String, peer: PeerRef, spoolFile: String?) {
        identity = TransferIdentity(prepared.offer, peerKey: peerKey, peer: peer)
        self.spoolFile = spoolFile
        fields = Mutex(Fields(shared: TransferShared(state: .offered), prepared: prepared, layout: prepared.layout))
    }

    func with<R: Sendable>(_ body: (inout Fields) -> R) -> R {
        fields.withLock { body(&$0) }
    }

    // Single fields, one lock each (not for the per-chunk paths, which take `with` once).
    var prepared: PreparedOffer {
        get { with { $0.prepared } }
        set { with { $0.prepared = newValue } }
    }
    var layout: ChunkLayout { with { $0.layout } }
    var hashing: HashingJob? {
        get { with { $0.hashing } }
        set { with { $0.hashing = newValue } }
    }
    var hashedFrom: Int? { with { $0.hashedFrom } }
    var offerWhenHashed: Bool {
        get { with { $0.offerWhenHashed } }
        set { with { $0.offerWhenHashed = newValue } }
    }
    var hasWindow: Bool { with { $0.window != nil } }
    var awaitingSuccessor: Bool {
        get { with { $0.awaitingSuccessor } }
        set { with { $0.awaitingSuccessor = newValue } }
    }
    var confirmedBytes: Int64 { with { $0.confirmedBytes } }
}
