import Dispatch
import Foundation
import PeerCrypto
import PeerFiles
import PeerIndex
import PeerNet
import PeerWire
@testable import SyncEngine
import Synchronization
import TestKit

/// Two ends, each a transfer service and a folder service on one queue and one in-memory
/// index (as in a node), joined by an in-memory link: no node, no sockets, no processes.
/// Frames one end sends reach the other end's service on that service's queue, in order;
/// chunks are read from the sender's file by the service's own `fill`, as a channel would.
/// The link can be cut (both ends see their session close) and connected again, and it can
/// corrupt or count chunks on the way.
final class TransferPair: @unchecked Sendable {
    // @unchecked: the links' state is confined to their queues; `nextSession` has a lock.
    let alice: End
    /// Replaced by `restartBob` (a new service over the same index, folder and identity).
    private(set) var bob: End
    private let nextSession = Mutex<UInt64>(1)

    /// One side: its service, the store it records in, the events it emits, its link.
    final class End: @unchecked Sendable {
        // @unchecked: `sessionID` is confined to `queue`; the rest is immutable or locked.
        let name: String
        let peer: PeerRef
        let queue: DispatchQueue
        let store: any TransferStore
        /// The index behind `store` (where the set-up pairs the two ends).
        let index: NodeIndex
        let publicKey: [UInt8]
        let events = EventLog()
        let service: TransferService
        let folders: FolderService
        let directory: String
        let flow = FlowCount()
        /// The other end (set once both exist).
        fileprivate(set) unowned var other: End!
        /// The session to the other end, 0 while not connected (confined to `queue`).
        fileprivate var sessionID: UInt64 = 0
        /// What happens to the chunks this end sends.
        let chunkRule = Mutex(ChunkRule())
        let link = LinkBox()
        /// Whether this end's hello lists `index-blocks` (as a node's does), as the other end sees it.
        let speaksIndexBlocks = Mutex(true)
        /// Whether this end's hello lists `streamed-manifest` (offers to it may stream).
        let speaksStreamedManifest = Mutex(true)
        /// Whether this end's hello lists `selection` (it is told the other end's selections).
        let speaksSelection = Mutex(true)
        /// Whether this end's hello lists `chunk-have` (the other end then announces what it fetches).
        let speaksChunkHave = Mutex(false)
        /// The `chunkHave` frames this end sent: path and bitmap.
        let chunkHavesSent = Mutex<[(path: String, bitmap: [UInt8])]>([])
        /// The selections this end announced (`folderSelection`), in order.
        let selectionsSent = Mutex<[[String]]>([])
        /// The chunks this end sent as `hashedChunk` frames (with their hash), by index.
        let hashedChunksSent = Mutex<[UInt32]>([])
        /// Every chunk this end put on the link (before a rule corrupts or loses it): index and bytes.
        let chunksSent = Mutex<[(index: UInt32, bytes: [UInt8])]>([])

        init(name: String, store: FailingStore?, configure: (inout NodeConfig) -> Void, restarting earlier: End? = nil) throws {
            self.name = name
            if let earlier {
                // A restart: the same identity, index and folder; nothing of the old process.
                publicKey = earlier.publicKey
                peer = earlier.peer
                index = earlier.index
                self.store = earlier.store
                directory = earlier.directory
            } else {
                let key = KeyPair.generate().publicKey
                publicKey = key.bytes
                peer = PeerRef(id: DeviceID(publicKey: key), name: name)
                index = try store?.index ?? NodeIndex.inMemory()
                self.store = store ?? index
                directory = NSTemporaryDirectory() + "transfer-service-\(name)-\(UUID().uuidString)"
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            queue = DispatchQueue(label: "test.transfers.\(name)")
            queue.setSpecific(key: LinkBox.owner, value: name)
            var config = NodeConfig()
            config.receiveDirectory = directory
            config.watchDelay = .milliseconds(50)
            configure(&config)
            service = TransferService(queue: queue, store: self.store, events: events, config: config)
            folders = FolderService(queue: queue, index: index, events: events, config: config,
                                    localDevice: peer.id.description.filter { $0 != "-" })
        }

        var deviceKey: String { peer.id.description.filter { $0 != "-" } }

        /// The session to the other end as this end's service sees it (on `queue`).
        fileprivate func view(_ id: UInt64) -> LinkSession {
            LinkSession(id: id, deviceKey: other.deviceKey, peer: other.peer, isConnected: id != 0,
                        chunks: ChunkPipe(from: self, session: id), flow: flow, frames: FramePipe(from: self, session: id),
                        blockDelta: true, indexBlocks: other.speaksIndexBlocks.withLock { $0 },
                        streamedManifest: other.speaksStreamedManifest.withLock { $0 }, resentBytes: true,
                        selection: other.speaksSelection.withLock { $0 }, chunkHave: other.speaksChunkHave.withLock { $0 })
        }

        /// Hands `frame`, sent on session `id`, to the other end (dropped when that session
        /// has ended on the other side by the time it arrives: a cut link loses what was in flight).
        fileprivate func deliver(_ frame: Frame, on id: UInt64) {
            if case .blockResponse = frame, holdAnswer(frame, on: id) { return }
            let other = self.other!
            other.queue.async {
                guard other.sessionID == id, id != 0 else { return }
                let session = other.view(id)
                if !other.service.frameReceived(frame, from: session) { _ = other.folders.frameReceived(frame, from: session) }
            }
        }

        /// Block answers this end sends: once `left` of them have gone (nil: no hold), the
        /// rest wait in `held` until `releaseAnswers` (a stalled uplink, no thread asleep).
        let answerHold = Mutex<(left: Int?, held: [(frame: Frame, session: UInt64)])>((nil, []))

        private func holdAnswer(_ frame: Frame, on id: UInt64) -> Bool {
            answerHold.withLock { hold in
                guard let left = hold.left else { return false }
                if left > 0 {
                    hold.left = left - 1
                    return false
                }
                hold.held.append((frame, id))
                return true
            }
        }

        /// Sends the held block answers and holds no more.
        func releaseAnswers() {
            let held = answerHold.withLock { hold in
                defer { hold = (nil, []) }
                return hold.held
            }
            for (frame, id) in held { deliver(frame, on: id) }
        }

        /// Frames this end's services sent that the channel would have refused (invalid or
        /// over the frame limit: never sent), and the paths of the index entries it sent.
        let refusedFrames = Mutex<[String]>([])
        let indexPathsSent = Mutex<[String]>([])
        /// The paths of the block requests this end sent, and the blocks of its index pages.
        let blockPathsAsked = Mutex<[String]>([])
        let indexBlocksSent = Mutex<[[UInt8]]>([])

        /// What `SecureChannel.send` does first: an invalid frame is refused, not sent.
        func admit(_ frame: Frame) -> Bool {
            do throws(WireError) { try frame.validate() } catch {
                refusedFrames.withLock { $0.append("\(frame.type): \(error)") }
                return false
            }
            switch frame {
            case let .indexUpdate(_, _, entries): indexPathsSent.withLock { $0 += entries.map(\.path) }
            case let .blockRequest(_, _, path, _, _, _), let .blockDeltaRequest(_, _, path, _, _, _, _):
                blockPathsAsked.withLock { $0.append(path) }
            case let .indexBlocks(_, blocks): indexBlocksSent.withLock { $0 += blocks }
            case let .folderSelection(_, paths): selectionsSent.withLock { $0.append(paths) }
            case let .chunkHave(_, path, _, _, bitmap): chunkHavesSent.withLock { $0.append((path, bitmap)) }
            default: break
            }
            return true
        }

        /// Plays a hostile peer: `frames` go to the other end as they are, on the current session.
        func sendRaw(_ frames: [Frame]) {
            sync { link.send(frames, on: sessionID) }
        }

        /// Plays a hostile peer from the other side: `frames` reach this end on the current
        /// session as if the other end had sent them, without a turn of the other end's queue
        /// (which a test may hold, so that its own answer comes later).
        func receiveRaw(_ frames: [Frame]) {
            let id = sync { sessionID }
            for frame in frames { other.deliver(frame, on: id) }
        }

        /// Runs `body` on this end's queue and returns its result.
        func sync<T>(_ body: () throws -> T) rethrows -> T { try queue.sync(execute: body) }
    }

    /// Corrupt chunks, or cut the link after so many chunks.
    struct ChunkRule {
        var corruptEvery = false
        var cutAfter: Int?
        var sent = 0
    }

    init(configureAlice: (inout NodeConfig) -> Void = { _ in },
         configureBob: (inout NodeConfig) -> Void = { $0.autoAccept = true },
         aliceStore: FailingStore? = nil, bobStore: FailingStore? = nil) throws {
        alice = try End(name: "alice", store: aliceStore, configure: configureAlice)
        bob = try End(name: "bob", store: bobStore, configure: configureBob)
        alice.other = bob
        bob.other = alice
        for end in [alice, bob] {
            end.link.end = end
            end.service.link = end.link
            end.folders.link = end.link
            // Paired: each index knows the other (transfer rows belong to a peer).
            try end.index.upsertPeer(PeerRecord(deviceID: end.other.deviceKey, name: end.other.name, publicKey: end.other.publicKey,
                                                trust: .paired, firstSeen: 1, lastSeen: 1, pairedAt: 1))
        }
    }

    /// Bob's process "restarts": the link is cut, and a new transfer service (and folder
    /// service) takes over his index, folder and identity, with nothing of the old one's
    /// memory. Call `connect()` afterwards.
    func restartBob(configure: (inout NodeConfig) -> Void = { $0.autoAccept = true }) throws {
        cut()
        for end in [alice, bob] { end.sync {} }
        let old = bob
        let new = try End(name: old.name, store: nil, configure: configure, restarting: old)
        old.folders.stopFolders()
        new.other = alice
        new.link.end = new
        new.service.link = new.link
        new.folders.link = new.link
        alice.sync { alice.other = new }
        bob = new
    }

    func cleanup() {
        for end in [alice, bob] {
            end.folders.stopFolders()
            try? FileManager.default.removeItem(atPath: end.directory)
        }
    }

    /// Cuts the link and lets what the exchange still has in flight end on both queues,
    /// then cleans up: for tests whose ends talk until the last moment (an unowned end
    /// was once read after a test had ended).
    func finish() {
        cut()
        for _ in 0..<3 { alice.sync {}; bob.sync {} }
        cleanup()
    }

    /// Connects the ends, and alice shares an empty `docs` with bob, who joins it.
    func joinedFolder() throws -> (docs: String, folder: String) {
        let docs = alice.directory + "/docs"
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        connect()
        let shared = try alice.folders.share(directory: docs, with: [(bob.deviceKey, "bob")])
        try Self.eventually("bob has joined") { (try? bob.index.folders().count) == 1 }
        return (docs, shared.folder)
    }

    /// Connects the two ends (a new session on both), as a handshake would.
    func connect() {
        let id = nextSession.withLock { id in
            defer { id += 1 }
            return id
        }
        // Both ends hold the session before either service hears of it (a frame sent at
        // once must find the other end's session).
        for end in [alice, bob] { end.sync { end.sessionID = id } }
        for end in [alice, bob] {
            end.sync {
                end.folders.sessionConnected(end.view(id))
                end.service.sessionConnected(end.view(id))
            }
        }
    }

    /// A duplicate connection: a new session at both ends, the old one closed as `replaced`
    /// (each end keeps the newer, as `ConnectionService.begin` does), bob first. Call on
    /// alice's queue: her part runs in the caller's step.
    func replaceSessionFromAlicesQueue() {
        let id = nextSession.withLock { id in
            defer { id += 1 }
            return id
        }
        for end in [bob, alice] {
            let replace = {
                let old = end.sessionID
                end.sessionID = id
                end.service.sessionConnected(end.view(id))
                let closed = LinkSession(id: old, deviceKey: end.other.deviceKey, peer: end.other.peer, isConnected: false,
                                         chunks: ChunkPipe(from: end, session: old), flow: end.flow,
                                         frames: FramePipe(from: end, session: old))
                end.service.sessionClosed(closed, replaced: true)
            }
            if end === alice { replace() } else { end.sync(replace) }
        }
    }

    /// Cuts the link: both ends see their session close.
    func cut() {
        for end in [alice, bob] {
            end.queue.async {
                let id = end.sessionID
                guard id != 0 else { return }
                end.sessionID = 0
                let closed = LinkSession(id: id, deviceKey: end.other.deviceKey, peer: end.other.peer, isConnected: false,
                                                      chunks: ChunkPipe(from: end, session: id), flow: end.flow,
                                                      frames: FramePipe(from: end, session: id))
                end.folders.sessionClosed(closed)
                end.service.sessionClosed(closed)
            }
        }
    }

    /// Sends the file at `path` from alice to bob; the returned box holds the outcome.
    @discardableResult
    func send(_ path: String, name: String? = nil) -> Outcome {
        let outcome = Outcome()
        let target = alice.sync {
            TransferService.Target(sessionID: alice.sessionID == 0 ? nil : alice.sessionID, deviceKey: bob.deviceKey, peer: bob.peer)
        }
        alice.service.send(path: path, to: target, name: name, spoolFile: nil, observer: { _ in },
                           completion: { outcome.set($0) })
        return outcome
    }

    /// Waits until `condition` holds (polling; a functional wait, never a timing assertion).
    static func eventually(_ what: String, timeout: Double = 60, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard Date() < deadline else { throw Timeout(what: what) }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    struct Timeout: Error, CustomStringConvertible {
        let what: String
        var description: String { "timed out waiting for \(what)" }
    }

    static func randomFile(_ path: String, size: Int, seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        try Data(generator.bytes(size)).write(to: URL(fileURLWithPath: path))
    }
}

/// The role `PeerLink` for one end (weak, as the node is to its service).
final class LinkBox: PeerLink, @unchecked Sendable {
    // @unchecked: `end` is set once before use; the rest runs on the end's queue.
    weak var end: TransferPair.End?
    /// Marks each end's queue with the end's name.
    static let owner = DispatchSpecificKey<String>()
    /// Calls that reached the sessions off the end's queue (the role is the owner's queue's:
    /// the connections change their sessions there).
    let offQueueCalls = Mutex(0)

    private func noteQueue() {
        guard let end, DispatchQueue.getSpecific(key: Self.owner) != end.name else { return }
        offQueueCalls.withLock { $0 += 1 }
    }

    func session(_ id: UInt64) -> LinkSession? {
        noteQueue()
        guard let end, id != 0, end.sessionID == id else { return nil }
        return end.view(id)
    }

    func connectedSession(device deviceKey: String) -> LinkSession? {
        noteQueue()
        guard let end, end.sessionID != 0, end.other.deviceKey == deviceKey else { return nil }
        return end.view(end.sessionID)
    }

    func connectedSessions() -> [LinkSession] {
        noteQueue()
        guard let end, end.sessionID != 0 else { return [] }
        return [end.view(end.sessionID)]
    }

    func send(_ frames: [Frame], on id: UInt64) {
        guard let end, id != 0, end.sessionID == id else { return }
        for frame in frames where end.admit(frame) { end.deliver(frame, on: id) }
    }
}

/// Frames sent from any thread on one session (block answers): they reach the other end
/// like any frame.
struct FramePipe: FrameSender {
    let end: TransferPair.End
    let session: UInt64

    init(from end: TransferPair.End, session: UInt64) {
        self.end = end
        self.session = session
    }

    func sendFromAnyThread(_ frames: [Frame]) {
        // As the channel does: an invalid frame is refused, not sent.
        for frame in frames where end.admit(frame) { end.deliver(frame, on: session) }
    }

    func afterQueuedSends(_ body: @escaping @Sendable () -> Void) {
        // Delivery is queued on the other end's queue: "written" once it is there.
        end.other.queue.async(execute: body)
    }

    func sendBlockFromAnyThread(request: UInt32, count: Int,
                                fill: @escaping @Sendable (UnsafeMutableRawBufferPointer) throws(FileError) -> Void) {
        // As the session does: the bytes `fill` gave, a refusal if it failed.
        var bytes = [UInt8](repeating: 0, count: count)
        let filled = bytes.withUnsafeMutableBytes { buffer in
            do throws(FileError) { try fill(buffer); return true } catch { return false }
        }
        end.deliver(.blockResponse(request: request, ok: filled, data: filled ? bytes : []), on: session)
    }
}

/// Chunk frames of one session: `fill` reads the chunk straight from the sender's file,
/// then the chunk goes to the other end like any frame (corrupted or cut by the rule).
struct ChunkPipe: ChunkSink {
    let end: TransferPair.End
    let session: UInt64

    init(from end: TransferPair.End, session: UInt64) {
        self.end = end
        self.session = session
    }

    func writeChunk(id: TransferID, index: UInt32, hash: [UInt8]?, count: Int,
                    fill: (UnsafeMutableRawBufferPointer, Int) throws(FileError) -> Void) -> FileError? {
        var bytes = [UInt8](repeating: 0, count: count)
        let failure: FileError? = bytes.withUnsafeMutableBytes { buffer in
            do throws(FileError) { try fill(buffer, 0) } catch { return error }
            return nil
        }
        if let failure { return failure }
        end.chunksSent.withLock { $0.append((index, bytes)) }
        let (corrupt, cut) = end.chunkRule.withLock { rule in
            rule.sent += 1
            return (rule.corruptEvery, rule.cutAfter.map { rule.sent > $0 } ?? false)
        }
        if cut { return nil }  // the link is down: lost in flight
        if corrupt, !bytes.isEmpty { bytes[bytes.count / 2] ^= 0xFF }
        if let hash {
            end.hashedChunksSent.withLock { $0.append(index) }
            end.deliver(.hashedChunk(id: id, index: index, hash: hash, data: bytes), on: session)
        } else {
            end.deliver(.chunk(id: id, index: index, data: bytes), on: session)
        }
        return nil
    }
}

/// `ReceiveFlow` that counts: every chunk received must be handled.
final class FlowCount: ReceiveFlow {
    private let counts = Mutex((frames: 0, bytes: 0))
    func received(_ bytes: Int) { counts.withLock { $0.frames += 1; $0.bytes += bytes } }
    func handled(_ bytes: Int) { counts.withLock { $0.frames -= 1; $0.bytes -= bytes } }
    func reserve(_ bytes: Int) -> Bool { true }
    func release(_ bytes: Int) {}
    var unhandled: (frames: Int, bytes: Int) { counts.withLock { $0 } }
}

/// `EventSink` that keeps every event.
final class EventLog: EventSink {
    private let events = Mutex<[NodeEvent]>([])
    func emit(_ event: NodeEvent) { events.withLock { $0.append(event) } }
    var all: [NodeEvent] { events.withLock { $0 } }

    var transfers: [TransferInfo] {
        all.compactMap { if case let .transfer(info) = $0 { info } else { nil } }
    }

    var errors: [String] {
        all.compactMap { if case let .error(failure) = $0 { failure.reason } else { nil } }
    }

    var offers: [NodeEvent.Offer] {
        all.compactMap { if case let .offer(offer) = $0 { offer } else { nil } }
    }
}

/// A send's end, set once.
final class Outcome: Sendable {
    private let result = Mutex<Result<TransferInfo, EngineError>?>(nil)
    func set(_ value: Result<TransferInfo, EngineError>) { result.withLock { if $0 == nil { $0 = value } } }
    var value: Result<TransferInfo, EngineError>? { result.withLock { $0 } }
}

/// A store that is the real index except for the writes told to fail (a full disk, a
/// damaged database): what the service does when the index says no.
final class FailingStore: TransferStore {
    let index: NodeIndex
    /// Names of the operations that fail: "insert", "state", "final path", "verified", and
    /// the reads "transfers" (a peer's list), "transfer" (one by ID), "chunks" (a
    /// transfer's chunks) and "peer" (a peer's record).
    let failing = Mutex<Set<String>>([])

    init() throws { index = try NodeIndex.inMemory() }

    private func check(_ operation: String) throws(IndexError) {
        if failing.withLock({ $0.contains(operation) }) {
            throw IndexError(kind: .sqlite, operation: operation, path: "", message: "database or disk is full")
        }
    }

    var path: String { index.path }
    func insertTransfer(_ transfer: TransferRecord, chunks: [TransferChunk]) throws(IndexError) {
        try check("insert")
        try index.insertTransfer(transfer, chunks: chunks)
    }
    func transfer(id: String) throws(IndexError) -> TransferRecord? {
        if failing.withLock({ $0.contains("transfer") }) {
            throw IndexError(kind: .sqlite, operation: "transfer", path: "", message: "no such table: transfers")
        }
        return try index.transfer(id: id)
    }
    func transfers(deviceID: String?) throws(IndexError) -> [TransferRecord] {
        if failing.withLock({ $0.contains("transfers") }) {
            throw IndexError(kind: .sqlite, operation: "transfers", path: "", message: "no such table: transfers")
        }
        return try index.transfers(deviceID: deviceID)
    }
    func resumableTransfer(deviceID: String, rootHash: [UInt8], direction: TransferRecord.Direction) throws(IndexError) -> TransferRecord? {
        try index.resumableTransfer(deviceID: deviceID, rootHash: rootHash, direction: direction)
    }
    func updateTransferState(id: String, to state: TransferRecord.State, error: String?) throws(IndexError) {
        try check("state")
        try index.updateTransferState(id: id, to: state, error: error)
    }
    func setTransferFinalPath(id: String, path finalPath: String) throws(IndexError) {
        try check("final path")
        try index.setTransferFinalPath(id: id, path: finalPath)
    }
    func transferChunks(transferID: String) throws(IndexError) -> [TransferChunk] {
        try check("chunks")
        return try index.transferChunks(transferID: transferID)
    }
    func pruneFinishedTransfers(changedBefore cutoff: Int64, keepingNewest keep: Int) throws(IndexError) -> Int {
        try index.pruneFinishedTransfers(changedBefore: cutoff, keepingNewest: keep)
    }
    func markChunksVerified(transferID: String, indices: [Int]) throws(IndexError) {
        try check("verified")
        try index.markChunksVerified(transferID: transferID, indices: indices)
    }
    func addTransferChunks(transferID: String, chunks: [TransferChunk], chunkCount: Int, rootHash: [UInt8]?) throws(IndexError) {
        try check("verified")
        try index.addTransferChunks(transferID: transferID, chunks: chunks, chunkCount: chunkCount, rootHash: rootHash)
    }
    func peer(deviceID: String) throws(IndexError) -> PeerRecord? {
        try check("peer")
        return try index.peer(deviceID: deviceID)
    }
}
