internal import PeerFiles
internal import PeerWire
internal import Synchronization

/// Fan-out (issue 43.4): chunks of files still being fetched, both ours and the members'.
///
/// When one member adds a large file, every other member fetches it at once; asking only the
/// members whose index holds it puts the whole load on the one that added it (its uplink is
/// then the bottleneck: a home server's upload, a laptop on Wi-Fi). So a node that is fetching
/// a file of several chunks tells the members that take it (`Frame.chunkHave`, hello feature
/// `chunk-have`) which of its chunks it holds already, verified, at most every
/// `announceInterval`; a puller adds such members to a chunk's sources; and the holder answers
/// block requests for those chunks from its temporary file, hashing what it reads first
/// (`bytes`): it never serves bytes that do not match the chunk's hash. What a member says is
/// only a hint: the puller verifies every chunk it gets, and an `ok = false` or a wrong answer
/// moves on to the next source, as for any block.
///
/// Bounds: we serve from at most `maxOwn` files at once (the newest; at most `maxOwnChunks`
/// chunks each); of each member we keep at most `maxPerMember` files (the newest
/// announcements of files of at most `maxOwnChunks` chunks: a bitmap of at most 8 KiB), each
/// forgotten `lifetime` after its last announcement, when the member says it holds nothing
/// of it, or when it did not give a chunk of it we asked for (`failed`: then for `distrust`). Ours are dropped when the
/// file's batch ends, placed or not (`done`), or when the folder's rules no longer let us serve
/// the path (`drop`: ignored, deselected, paused); until then only what still hashes right in
/// its temporary file is served. A file we announced and then drop without placing it is
/// withdrawn: the members are told we hold none of it (`Note.withdrawal`), so they stop
/// asking us at once instead of for up to `lifetime`.
final class HeldChunks: Sendable {
    /// What we tell the members about one file (`Frame.chunkHave`).
    struct Note: Sendable, Equatable {
        let path: String
        let root: [UInt8]
        let count: UInt32
        let bitmap: [UInt8]
        /// The version fetched is our own change coming back (`modifiedBy` is this node): not
        /// told to a member we are receive-only towards (FolderService+Fanout).
        var ownChange = false

        /// What tells the members we hold none of the file any more: the same file, no bit
        /// set (a member forgets it, as every version with the feature does).
        static func withdrawal(path: String, root: [UInt8], count: Int, ownChange: Bool = false) -> Note {
            Note(path: path, root: root, count: UInt32(count), bitmap: [UInt8](repeating: 0, count: WireLimits.heldBitmapSize(UInt32(count))),
                 ownChange: ownChange)
        }

        var isWithdrawal: Bool { !bitmap.contains { $0 != 0 } }
    }

    static let announceInterval: Duration = .milliseconds(250)
    static let maxOwn = 16
    static let maxOwnChunks = 1 << 16
    static let maxPerMember = 16
    static let lifetime: Duration = .seconds(10)
    /// How long a member that did not give a chunk of a file it said it holds is not asked
    /// for that file's chunks on its word again (`failed`).
    static let distrust: Duration = .seconds(300)
    /// The most files per member that `distrust` remembers.
    static let maxDistrusted = 4 * maxOwn

    /// A file we are fetching: its chunks (by offset), which we hold, and where.
    private struct Own {
        let path: String
        let root: [UInt8]
        let chunks: [ChunkRef]
        var bits: [UInt8]
        let directory: DirectoryHandle
        let temp: String
        let started: ContinuousClock.Instant
        var sent: ContinuousClock.Instant?
        let ownChange: Bool
    }

    /// What a member said it holds of a file.
    private struct Theirs {
        let root: [UInt8]
        let count: Int
        let bits: [UInt8]
        let at: ContinuousClock.Instant
    }

    private struct State {
        var own: [PathKey: Own] = [:]
        var theirs: [String: [PathKey: Theirs]] = [:]
        /// Per member: the files it said it holds chunks of and then did not give one, and when.
        var failed: [String: [PathKey: ContinuousClock.Instant]] = [:]
    }

    private let state = Mutex(State())

    // MARK: - Ours

    /// A pull of `path` starts: every chunk but `missing` is in `temp` (in `directory`) already.
    /// A file of one chunk, or of more than `maxOwnChunks`, is not shared while it is fetched.
    func fetching(path: String, root: [UInt8], chunks: [ChunkRef], missing: [ChunkRef], directory: DirectoryHandle, temp: String,
                  ownChange: Bool = false, now: ContinuousClock.Instant = .now) {
        guard chunks.count >= 2, chunks.count <= Self.maxOwnChunks, root.count == 32 else { return }
        var bits = [UInt8](repeating: 0, count: WireLimits.heldBitmapSize(UInt32(chunks.count)))
        let absent = Set(missing.map(\.offset))
        for (n, chunk) in chunks.enumerated() where !absent.contains(chunk.offset) { bits[n / 8] |= 1 << (n % 8) }
        let own = Own(path: path, root: root, chunks: chunks, bits: bits, directory: directory, temp: temp, started: now,
                      ownChange: ownChange)
        state.withLock { state in
            let key = PathKey(path)
            if state.own[key] == nil, state.own.count >= Self.maxOwn,
               let oldest = state.own.min(by: { $0.value.started < $1.value.started })?.key {
                state.own[oldest] = nil
            }
            state.own[key] = own
        }
    }

    /// The chunk of `path` at `offset` is verified and written: what to tell the members, when
    /// the last note of that file is `announceInterval` old (or there was none).
    func verified(path: String, offset: UInt64, now: ContinuousClock.Instant = .now) -> Note? {
        state.withLock { state in
            let key = PathKey(path)
            guard var own = state.own[key], let n = Self.chunkIndex(own.chunks, offset) else { return nil }
            own.bits[n / 8] |= 1 << (n % 8)
            let due = own.sent.map { now - $0 >= Self.announceInterval } ?? true
            if due { own.sent = now }
            state.own[key] = own
            return due ? Note(path: own.path, root: own.root, count: UInt32(own.chunks.count), bitmap: own.bits, ownChange: own.ownChange) : nil
        }
    }

    /// The files' batch ended: nothing more is served from their temporary files. Returns the
    /// withdrawals of those we announced and did not place (`placed`): a failed pull.
    func done(paths: [String], placed: Set<String>) -> [Note] {
        state.withLock { state in
            guard !state.own.isEmpty else { return [] }
            var withdrawn: [Note] = []
            for path in paths {
                guard let own = state.own.removeValue(forKey: PathKey(path)), own.sent != nil, !placed.contains(path) else { continue }
                withdrawn.append(.withdrawal(path: own.path, root: own.root, count: own.chunks.count, ownChange: own.ownChange))
            }
            return withdrawn
        }
    }

    /// Drops our files whose paths `excluded` says the folder no longer serves (its rules
    /// changed during the pull): nothing more is served from their temporary files, nor
    /// announced. Returns the withdrawals of those we announced.
    func drop(where excluded: (String) -> Bool) -> [Note] {
        state.withLock { state in
            var withdrawn: [Note] = []
            for (key, own) in state.own where excluded(own.path) {
                state.own[key] = nil
                if own.sent != nil { withdrawn.append(.withdrawal(path: own.path, root: own.root, count: own.chunks.count, ownChange: own.ownChange)) }
            }
            return withdrawn
        }
    }

    /// Whether we serve from the temporary file of `path` now (for tests).
    func isServing(_ path: String) -> Bool { state.withLock { $0.own[PathKey(path)] != nil } }

    /// A member's block request that the index cannot answer: the chunk's bytes if it is one of
    /// a file we are fetching that we hold, read from its temporary file and hashed (nil when
    /// they do not match, or the file is gone). Any thread (the serve queue).
    func bytes(path: String, offset: UInt64, size: UInt32, hash: [UInt8]) -> [UInt8]? {
        let found = state.withLock { state -> (ChunkRef, DirectoryHandle, String)? in
            guard let own = state.own[PathKey(path)], let n = Self.chunkIndex(own.chunks, offset),
                  own.bits[n / 8] & (1 << (n % 8)) != 0 else { return nil }
            let chunk = own.chunks[n]
            guard chunk.size == size, chunk.hash.bytes == hash else { return nil }
            return (chunk, own.directory, own.temp)
        }
        guard let (chunk, directory, temp) = found else { return nil }
        return try? ChunkReader(name: temp, in: directory).bytes(of: chunk, verify: true)
    }

    // MARK: - The members'

    /// A member's `chunkHave` (its checks done by the frame's decoding): kept, replacing what it
    /// said of that path before; one that holds nothing forgets it. Returns whether it is kept.
    @discardableResult
    func received(device: String, path: String, root: [UInt8], count: UInt32, bitmap: [UInt8],
                  now: ContinuousClock.Instant = .now) -> Bool {
        let key = PathKey(path)
        let holds = bitmap.contains { $0 != 0 }
        // (A file of more chunks than we fetch with fan-out can never match one of ours.)
        let valid = root.count == 32 && count >= 1 && count <= UInt32(Self.maxOwnChunks)
            && bitmap.count == WireLimits.heldBitmapSize(count)
        return state.withLock { state in
            let distrusted = state.failed[device]?[key].map { now - $0 < Self.distrust } ?? false
            var files = state.theirs[device] ?? [:]
            files = files.filter { now - $0.value.at < Self.lifetime }
            files[key] = nil
            if holds && valid && !distrusted {
                if files.count >= Self.maxPerMember, let oldest = files.min(by: { $0.value.at < $1.value.at })?.key { files[oldest] = nil }
                files[key] = Theirs(root: root, count: Int(count), bits: bitmap, at: now)
            }
            state.theirs[device] = files.isEmpty ? nil : files
            return holds && valid && !distrusted
        }
    }

    /// `device` did not give a chunk of `path` we asked it for (refused, unanswered in time,
    /// or bytes that do not match): what it said of `path` is forgotten, and what it says of
    /// it for `distrust` is not kept. A member that announces a file and answers nothing
    /// then holds up the chunks asked of it once (one block timeout), not each time it
    /// announces again.
    func failed(device: String, path: String, now: ContinuousClock.Instant = .now) {
        let key = PathKey(path)
        state.withLock { state in
            var failed = (state.failed[device] ?? [:]).filter { now - $0.value < Self.distrust }
            if failed[key] == nil, failed.count >= Self.maxDistrusted,
               let oldest = failed.min(by: { $0.value < $1.value })?.key {
                failed[oldest] = nil
            }
            failed[key] = now
            state.failed[device] = failed
            state.theirs[device]?[key] = nil
            if state.theirs[device]?.isEmpty == true { state.theirs[device] = nil }
        }
    }

    /// The members among `connected` that said they hold the chunk at `offset` of the version
    /// `root` of `path`, which we are fetching (sorted).
    func holders(path: String, root: [UInt8], offset: UInt64, among connected: Set<String>,
                 now: ContinuousClock.Instant = .now) -> [String] {
        state.withLock { state in
            guard !state.theirs.isEmpty, let own = state.own[PathKey(path)], own.root == root,
                  let n = Self.chunkIndex(own.chunks, offset) else { return [] }
            let key = PathKey(path)
            return state.theirs.compactMap { device, files in
                guard connected.contains(device), let file = files[key], file.root == root, file.count == own.chunks.count,
                      now - file.at < Self.lifetime, file.bits[n / 8] & (1 << (n % 8)) != 0 else { return nil }
                return device
            }.sorted()
        }
    }

    /// How many files of `device` are kept, and their bitmaps' bytes (for tests and bounds).
    func kept(device: String) -> (files: Int, bytes: Int) {
        state.withLock { state in
            let files = state.theirs[device] ?? [:]
            return (files.count, files.values.reduce(0) { $0 + $1.bits.count })
        }
    }

    // MARK: - Order

    /// The order in which a node fetches a file's missing chunks: starting at a point of the
    /// file that depends on the node (`device`), then around. Nodes fetching the same file at
    /// once then hold different parts of it early, and can fetch the rest from each other;
    /// fetched in the same order, none would ever hold a chunk another lacks. The point is
    /// the node's rank among itself and the devices it is connected to that do not hold the file
    /// yet (`among`), spread evenly over the file: nodes connected to each other and to the same
    /// others start as far apart as they can (a pull keeps 16 MiB in flight: two starts closer than that would hold
    /// nothing the other asks for until one of them wrapped around).
    static func spread(_ missing: [ChunkRef], device: String, among connected: Set<String>) -> [ChunkRef] {
        guard missing.count >= 2 else { return missing }
        let ranked = connected.union([device]).sorted()
        let rank = ranked.firstIndex(of: device) ?? 0
        let start = rank * missing.count / ranked.count
        return Array(missing[start...] + missing[..<start])
    }

    /// The position of the chunk at `offset` in `chunks` (sorted by offset), if one starts there.
    private static func chunkIndex(_ chunks: [ChunkRef], _ offset: UInt64) -> Int? {
        var (low, high) = (0, chunks.count)
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle].offset < offset { low = middle + 1 } else { high = middle }
        }
        return low < chunks.count && chunks[low].offset == offset ? low : nil
    }
}
