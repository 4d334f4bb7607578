internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import PeerNet
internal import PeerWire

// The roles the services reach each other through. `ConnectionService` plays `PeerLink`
// (its sessions) for transfers and folders and reports to a `SessionObserver`; the node
// (the composition root) plays `SessionObserver`, fanning out to the services, and
// `NearbyPeers` over discovery; the index plays `TransferStore`, the event bus `EventSink`.
// The unit tests play them with an in-memory link between two services, a store that fails
// on demand, or a recording observer (TransferServiceTests, FolderServiceTests,
// ConnectionServiceTests), without processes. docs/ARCHITECTURE.md has the table of who
// plays what.

/// A session with a peer as transfers see it: who it is, whether it is connected (paired
/// and open), where chunk frames go and what counts the bytes we have not handled yet.
struct LinkSession: Sendable {
    let id: UInt64
    /// The peer's compact device ID (the index's key).
    let deviceKey: String
    let peer: PeerRef
    let isConnected: Bool
    /// Writes chunk frames straight from a file (any thread).
    let chunks: any ChunkSink
    /// The session's flow control: a chunk counts until it is on disk, a block answer
    /// until it is written.
    let flow: any ReceiveFlow
    /// Sends from any thread (block answers prepared off the owner's queue).
    let frames: any FrameSender
    /// The peer's hello lists `block-delta`: it answers block delta requests.
    var blockDelta = false
    /// The peer's hello lists `index-blocks`: it takes small files' content with our index.
    var indexBlocks = false
    /// The peer's hello lists `streamed-manifest`: it takes offers whose manifests stream.
    var streamedManifest = false
    /// The peer's hello lists `resent-bytes`: it takes the sender's "re-sent" figure.
    var resentBytes = false
    /// The peer's hello lists `selection`: it takes our folders' selections (`folderSelection`).
    var selection = false
    /// The peer's hello lists `chunk-have`: it takes what we hold of files we are still fetching.
    var chunkHave = false
    /// The peer's hello lists `growing-files`: it takes the chunks of files we are hashing.
    var growingFiles = false
}

/// A session's send queue, for work off the owner's queue.
protocol FrameSender: Sendable {
    /// Queues `frames` in order; any thread.
    func sendFromAnyThread(_ frames: [Frame])
    /// Runs `body` once everything queued so far is written (or the session ended).
    func afterQueuedSends(_ body: @escaping @Sendable () -> Void)
    /// Queues an answer to block request `request`, in order with `sendFromAnyThread`'s
    /// frames: `count` bytes that `fill(buffer)` reads from the file, when the answer's turn
    /// comes, into a buffer of the session's, and checks against the block's hash there; the
    /// answer is then encrypted straight from that buffer (no block-sized copy on the way), so
    /// what goes out is exactly what was hashed. If `fill` throws (unreadable, or not the
    /// bytes asked for), the answer is a refusal (`ok: false`) and nothing of the block is
    /// sent. The answer counts in the session's flow until it is written.
    func sendBlockFromAnyThread(request: UInt32, count: Int,
                                fill: @escaping @Sendable (UnsafeMutableRawBufferPointer) throws(FileError) -> Void)
}

/// The sessions, for the services above them (called on the owner's queue).
protocol PeerLink: AnyObject, Sendable {
    /// The session `id`, in any state but closed; nil when it is gone.
    func session(_ id: UInt64) -> LinkSession?
    /// The connected session with the device `deviceKey`, if there is one.
    func connectedSession(device deviceKey: String) -> LinkSession?
    /// Every connected session.
    func connectedSessions() -> [LinkSession]
    /// Queues `frames` on the session `id` in order (nothing when it is gone).
    func send(_ frames: [Frame], on id: UInt64)
}

/// What the connections tell the layers above the sessions (transfers, folders, streams),
/// on the owner's queue. The node plays it and hands each call to the services.
protocol SessionObserver: AnyObject {
    /// The session is paired and open (its pairing frames are sent).
    func sessionConnected(_ session: Session)
    /// A transfer or folder frame from a connected peer.
    func transferFrame(_ frame: Frame, on session: Session)
    /// A stream frame from a connected peer; false when it ended the session (its further
    /// actions are dropped).
    func streamFrame(_ frame: Frame, on session: Session) -> Bool
    /// The session ended (`reason`) and is no longer listed.
    func sessionEnded(_ session: Session, reason: String)
    /// The connections' timer fired (at its next deadline: at least every keepalive interval
    /// while a session is open), before their own timeouts.
    func timerFired()
}

/// What discovery knows that dialling uses (on the owner's queue); the node plays it over
/// `NodeDiscovery`, and nothing plays it when discovery is off.
protocol NearbyPeers: AnyObject {
    /// Discovery must not dial `device` (the user or the peer ended the session on purpose)
    /// until `release`.
    func holdOff(_ device: String)
    func release(_ device: String)
    func isHeldOff(_ device: String) -> Bool
    /// The addresses discovery saw `device` at, freshest first.
    func addresses(of device: String) -> [String]
    /// Names of nearby nodes that are not paired (what a name the user typed may mean).
    func nearbyUnpairedNames() -> [String]
}

/// Where a chunk is written from a file without a chunk-sized buffer (`SecureChannel`).
protocol ChunkSink: Sendable {
    /// Sends chunk `index` of `id`, `count` bytes that `fill(buffer, offset)` reads into the
    /// buffer, with its 32-byte `hash` when given (a `hashedChunk` frame: the chunk of a
    /// streamed manifest); returns the error `fill` threw, if any. A failed channel is no
    /// error here: it ends the session, and that pauses the transfer.
    func writeChunk(id: TransferID, index: UInt32, hash: [UInt8]?, count: Int,
                    fill: (UnsafeMutableRawBufferPointer, Int) throws(FileError) -> Void) -> FileError?
    /// The same with the chunk's bytes at hand (a mapped file's), sent without a copy where the sink can.
    func writeChunk(id: TransferID, index: UInt32, hash: [UInt8]?, bytes: UnsafeRawBufferPointer)
}

extension ChunkSink {
    func writeChunk(id: TransferID, index: UInt32, hash: [UInt8]?, bytes: UnsafeRawBufferPointer) {
        _ = writeChunk(id: id, index: index, hash: hash, count: bytes.count) { (buffer, offset) throws(FileError) in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + buffer.count)]))
        }
    }
}

/// Counts frames read from a peer until they are handled, so a peer faster than our disk is
/// read no faster (`SessionFlow`).
protocol ReceiveFlow: Sendable {
    func received(_ bytes: Int)
    func handled(_ bytes: Int)
    /// Reserves `bytes` of the budget for answers in preparation; false when it is spent.
    func reserve(_ bytes: Int) -> Bool
    /// Gives back what `reserve` took, once the answer is written.
    func release(_ bytes: Int)
}

/// The index's transfer rows (and the peer rows transfers read), as the transfer service
/// uses them. Resume after a restart depends on these records.
protocol TransferStore: Sendable {
    var path: String { get }
    func insertTransfer(_ transfer: TransferRecord, chunks: [TransferChunk]) throws(IndexError)
    func transfer(id: String) throws(IndexError) -> TransferRecord?
    func transfers(deviceID: String?) throws(IndexError) -> [TransferRecord]
    func resumableTransfer(deviceID: String, rootHash: [UInt8], direction: TransferRecord.Direction) throws(IndexError) -> TransferRecord?
    func updateTransferState(id: String, to state: TransferRecord.State, error: String?) throws(IndexError)
    func setTransferFinalPath(id: String, path finalPath: String) throws(IndexError)
    func transferChunks(transferID: String) throws(IndexError) -> [TransferChunk]
    func markChunksVerified(transferID: String, indices: [Int]) throws(IndexError)
    func addTransferChunks(transferID: String, chunks: [TransferChunk], chunkCount: Int, rootHash: [UInt8]?) throws(IndexError)
    func pruneFinishedTransfers(changedBefore cutoff: Int64, keepingNewest keep: Int) throws(IndexError) -> Int
    func peer(deviceID: String) throws(IndexError) -> PeerRecord?
}

extension NodeIndex: TransferStore {
    func markChunksVerified(transferID: String, indices: [Int]) throws(IndexError) {
        try markChunksVerified(transferID: transferID, indices: indices[...])
    }
}

extension SecureChannel: ChunkSink {
    func writeChunk(id: TransferID, index: UInt32, hash: [UInt8]?, count: Int,
                    fill: (UnsafeMutableRawBufferPointer, Int) throws(FileError) -> Void) -> FileError? {
        do throws(NetError) {
            if let hash { return try sendHashedChunk(id: id, index: index, hash: hash, count: count, fill: fill) }
            return try sendChunk(id: id, index: index, count: count, fill: fill)
        } catch { return nil }
    }

    func writeChunk(id: TransferID, index: UInt32, hash: [UInt8]?, bytes: UnsafeRawBufferPointer) {
        try? sendChunk(id: id, index: index, hash: hash, bytes: bytes)
    }
}

extension SessionFlow: ReceiveFlow {}

extension TransferStore {
    func transfers() throws(IndexError) -> [TransferRecord] { try transfers(deviceID: nil) }

    func updateTransferState(id: String, to state: TransferRecord.State) throws(IndexError) {
        try updateTransferState(id: id, to: state, error: nil)
    }
}

/// What the node and every service report through: `emit` (to their event sink), and on it
/// an error event and the time in milliseconds.
protocol Reporting {
    func emit(_ event: NodeEvent)
}

extension Reporting {
    func emitError(_ peer: PeerRef?, _ reason: String) {
        emit(.error(.init(peer: peer, reason: reason, time: now())))
    }

    func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Whether the `count`th refusal of a kind is reported: the 1st, 10th, 100th, ... (a
    /// flood of refusals does not flood the events).
    static func isReported(_ count: Int) -> Bool {
        var mark = 1
        while mark < count { mark *= 10 }
        return mark == count
    }
}

extension PeerRef {
    /// A peer of the index as results show it; a device ID the index holds that does not
    /// parse is damaged data.
    static func indexed(device compact: String, name: String, index: NodeIndex) throws(EngineError) -> PeerRef {
        do { return PeerRef(id: try DeviceID(parsing: compact), name: name) } catch {
            throw .index(IndexError(kind: .unexpectedValue, operation: "read peer", path: index.path,
                                    message: "device ID '\(compact)' is not valid: \(error.description)"))
        }
    }
}
