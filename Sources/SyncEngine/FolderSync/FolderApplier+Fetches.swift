#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import Synchronization
internal import PeerFiles
internal import PeerIndex

/// What an apply's work on other threads reaches: the blocks' answers (on the node's queue,
/// or on `verifyQueue`, several at once), and `recorder`, which records placed batches.
extension FolderApplier {
    /// The part of an applier that threads other than the folder's `io` use. Checked
    /// `Sendable`: immutable, or behind its own lock. Everything else of the applier is
    /// `io`'s alone (`FolderApplier` is not `Sendable`: the compiler keeps it off the closures
    /// that run elsewhere).
    final class Core: Sendable {
        let folder: SharedFolder
        let host: any FolderHost
        let index: NodeIndex
        let folderID: String
        /// Peers that answered a delta request whole: they do not speak `block-delta`.
        let plainPeers = Mutex<Set<String>>([])
        /// Set when the disk is full: the batch's remaining chunks are not fetched.
        let diskFull = FailureFlag()
        /// Records `recorder` stored for placed batches, or why it could not (taken in by `settle`).
        let stored = Mutex<[(records: [FileRecord], failure: String?)]>([])
        /// Bytes asked of each peer and not answered yet: a chunk's first request goes to the
        /// source with the fewest (a slow uplink's queue grows, and it is asked less).
        let asked = Mutex<[String: Int]>([:])

        init(folder: SharedFolder, host: any FolderHost, index: NodeIndex) {
            self.folder = folder
            self.host = host
            self.index = index
            folderID = folder.id
        }

        /// Asks the peers in turn (starting at a different one per chunk) until one answers
        /// with bytes that match the hash; the completion gets nil when none did, and whether a
        /// peer answered with bytes that do not match. With a `base`, the chunk is asked for as
        /// a delta against what it holds at that range (when it still holds the whole range).
        func fetch(_ chunk: ChunkRef, path: String, sources: [String], attempt: Int, tries: Int = 0, lied: Bool = false,
                           base: DeltaBase?, whole: Bool = false, completion: @escaping @Sendable ([UInt8]?, Bool) -> Void) {
            if let want = want(chunk, path: path, sources: sources, attempt: attempt, tries: tries, lied: lied, base: base, whole: whole,
                               completion: completion) {
                host.requestBlocks([want])
            }
        }

        /// `fetch`'s request to the next peer to ask, or nil when every peer was asked (the
        /// completion has then been called). `launch` sends many at once.
        func want(_ chunk: ChunkRef, path: String, sources: [String], attempt: Int, tries: Int = 0, lied: Bool = false,
                          base: DeltaBase?, whole: Bool = false, completion: @escaping @Sendable ([UInt8]?, Bool) -> Void) -> BlockWant? {
            guard tries < sources.count else { completion(nil, lied); return nil }
            // The first try picks the least loaded source (ties: in turn); the next ones follow it.
            let attempt = tries == 0 ? leastAsked(sources, from: attempt) : attempt
            let device = sources[(attempt + tries) % sources.count]
            asked.withLock { $0[device, default: 0] += Int(chunk.size) }
            // Not summed for a peer that answered a delta request whole (it does not speak
            // `block-delta`: the sums would be read and hashed for nothing).
            let sums = whole || plainPeers.withLock({ $0.contains(device) }) ? nil : base?.sums(chunk)
            return BlockWant(device: device, folder: folderID, path: path, offset: chunk.offset, size: chunk.size,
                             hash: chunk.hash.bytes, sums: sums) { [self] reply in
                asked.withLock { $0[device, default: 0] -= Int(chunk.size) }
                if sums != nil, case .whole = reply { plainPeers.withLock { _ = $0.insert(device) } }
                // The answer arrives on the node's queue: a large block is hashed and written
                // elsewhere, several at once (a 4 MiB block was ~4 ms of SHA-256 before BLAKE3, which held the
                // node's queue and kept a large pull to one core); a small one is not worth the hop.
                let answer: @Sendable () -> Void = { [self] in
                    verified(reply, chunk, path: path, device: device, sources: sources, attempt: attempt, tries: tries, lied: lied,
                             base: base, completion: completion)
                }
                // (A delta, or the next try's sums, reads our own file: never on the node's queue.)
                if chunk.size >= FolderApplier.largeBlock || base != nil { FolderApplier.verifyQueue.async(execute: answer) } else { answer() }
            }
        }

        /// The position in `sources` of the one with the fewest bytes asked and unanswered,
        /// looked at in turn from `attempt` (so that equals take turns).
        private func leastAsked(_ sources: [String], from attempt: Int) -> Int {
            guard sources.count > 1 else { return attempt }
            let load = asked.withLock { asked in sources.map { asked[$0] ?? 0 } }
            let start = attempt % sources.count
            return (0..<sources.count).map { (start + $0) % sources.count }.min { load[$0] < load[$1] } ?? start
        }

        /// `fetch`'s answer: the bytes when they match the chunk's hash, else the next peer. A
        /// delta that does not give the chunk (our file changed meanwhile, a sum matched other
        /// bytes, or the peer lied) is asked for again from the same peer, whole.
        private func verified(_ reply: BlockReply?, _ chunk: ChunkRef, path: String, device: String, sources: [String], attempt: Int,
                              tries: Int, lied: Bool, base: DeltaBase?, completion: @escaping @Sendable ([UInt8]?, Bool) -> Void) {
            var bytes: [UInt8]?
            var (received, reused) = (0, 0)
            switch reply {
            case let .whole(data):
                (bytes, received) = (data, data.count)
            case let .delta(answer):
                received = answer.count
                if var own = base?.bytes(chunk), let carried = BlockDelta.apply(answer, to: &own) { (bytes, reused) = (own, own.count - carried) }
            case nil:
                break
            }
            // (The size too: a manifest may name a chunk's hash with another size, and a new
            // temp file of one chunk takes its size from that chunk's write.)
            if let bytes, bytes.count == Int(chunk.size), ChunkHash.of(bytes) == chunk.hash {
                folder.activity.fetched(path: path, from: device, bytes: bytes.count, received: received, reused: reused)
                completion(bytes, lied)
                return
            }
            folder.activity.fetched(path: path, from: device, bytes: 0, received: received)
            if case .delta = reply {
                // Asked again whole from the same peer; the next peers still get deltas.
                fetch(chunk, path: path, sources: sources, attempt: attempt, tries: tries, lied: lied, base: base, whole: true,
                      completion: completion)
            } else {
                // Not asked for this file's chunks on its word (`chunkHave`) again for a while.
                folder.held.failed(device: device, path: path)
                fetch(chunk, path: path, sources: sources, attempt: attempt, tries: tries + 1, lied: lied || bytes != nil,
                      base: base, completion: completion)
            }
        }

        /// Writes records to the index (any thread: the placed batches' records are written on
        /// `recorder`); nil, or why they could not be.
        func upsert(_ records: [FileRecord]) -> String? {
            guard !records.isEmpty else { return nil }
            do {
                _ = try index.upsertFiles(records)
                return nil
            } catch {
                return "cannot record it in the index: \(error)"
            }
        }
    }

    /// Blocks of at least this size are verified and written on `verifyQueue`, and their
    /// writeback is started as soon as they are written.
    static let largeBlock: UInt32 = 256 << 10

    /// Verifies and writes fetched blocks (concurrent; the in-flight budget bounds the work).
    static let verifyQueue = DispatchQueue(label: "syncpeer.folder.verify", qos: .utility, attributes: .concurrent)

    /// Writes all of `bytes` at `offset`; 0, or the errno of the failure. Any thread (block
    /// callbacks): it touches nothing but the descriptor.
    static func write(_ bytes: [UInt8], at offset: UInt64, _ fd: Int32) -> Int32 {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(offset) + off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return n == 0 ? ENOSPC : errno }
            done += n
        }
        return 0
    }
}
