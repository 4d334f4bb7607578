#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import Synchronization
internal import PeerFiles
internal import PeerIndex

/// Applies a folder's planned actions to the disk and the index (on the folder's `io`).
///
/// Files are assembled in temporary files next to their final place (`tempName(forPath:)`,
/// which scanners and watchers ignore), chunk by chunk: first from any local file that
/// holds a chunk with the same hash (renames and copies move no data), then from connected
/// peers that have the content, several chunks and several peers at once. Every chunk is
/// verified. A batch of files then gets one durability barrier (`syncfs`) before the
/// renames and one after, so many small files cost two barriers, not one fsync each, and a
/// crash leaves every file either old or new. A batch of a few files takes an `fsync` of
/// each file and of its directory instead (`perFileSyncLimit`): `syncfs` would also wait
/// for whatever else was written to the same file system. A sealed batch waits for its
/// last fetches and its first barrier on `flusher` while `io` prepares the next batch (see
/// `seal`).
///
/// Every rename, link, write, mode and time change is checked: one that fails is an error
/// event and a failure of the path in the folder's status (`fail`), and the path keeps what
/// it had — a local version is never overwritten unless it was first kept (a conflict copy)
/// or the index shows it is exactly what a peer has seen.
final class FolderApplier {
    // Not `Sendable`: everything below is the folder's `io`'s alone (`apply` runs there), and
    // the compiler keeps the applier off every closure that runs elsewhere. Those reach
    // only values and `core` (checked `Sendable`): the block answers (on the node's queue,
    // on `verifyQueue`, several at once) call `core`'s `want`/`fetch`/`verified` and
    // `write(_:at:_:)` (pwrite on a descriptor); `flusher` runs a sealed `Flushing`'s
    // `flush`; `recorder` records placed batches through `core` (the index and the locked
    // `stored`).
    let core: Core
    var folder: SharedFolder { core.folder }
    var host: any FolderHost { core.host }
    var index: NodeIndex { core.index }
    var folderID: String { core.folderID }
    let local: [PathKey: FileEntry]
    /// Path → device → that peer's state (what the plan was made from).
    let remotes: [PathKey: [String: FileEntry]]
    let manifests: [PathKey: [String: [UInt8]]]
    /// Small files' content that came with the peers' index pages (verified), by hash: written
    /// as it is, neither looked up in local files nor asked for. A written block goes at the
    /// next lookup window (`lookUpLocalChunks`: files of the same content in that window use
    /// it too; a later one's hash is looked up in local files again), with its share of the
    /// node's budget (`releasedBlockCost`): waiting pages then keep theirs.
    var blocks: [ChunkHash: IndexBlock]
    /// Blocks written since the last lookup window.
    var usedBlocks: [ChunkHash] = []
    /// What the written blocks gave back of `FolderHost.indexBlockBudget`.
    var releasedBlockCost = 0
    /// Peers connected at the start of the apply, refreshed by `launch` (at most every
    /// `refreshInterval`).
    var connected: Set<String> = []
    /// Chunk hash → where local files hold it (looked up for every `lookUpActions` actions; files
    /// placed since by this apply may hold other content there now: `LocalSource.holds`).
    var localLocations: [[UInt8]: [ChunkLocation]] = [:]
    /// The manifests `lookUpLocalChunks` decoded for its window (path → device, manifest),
    /// each taken by its file's pull (`manifest(of:from:)`): decoded once per file, not twice
    /// (a decode checks the root hash). At most `lookUpActions` of them.
    var decoded: [PathKey: (device: String, manifest: Manifest)] = [:]
    /// Replaced versions left at their temporary names by `placeOver`, removed at the end
    /// of the batch's commit.
    var outgoing: [(directory: DirectoryHandle, name: String, expected: FileRecord)] = []
    /// Paths whose local version the caller kept in the versions store already (`revert`):
    /// `keepVersion` does not keep them twice.
    var keptBefore: Set<PathKey> = []
    /// The directories of the batch being prepared, each opened once (`pull`; let go at
    /// `seal` and `settle`, so a handle is kept no longer than its batch's check in `place`).
    var parents = ParentHandles()
    /// Files assembled and waiting for the batch barrier.
    var pending: [Pending] = []
    var pendingBytes: Int64 = 0
    /// Descriptors `pending` holds open: its temporary files, and the directories of its
    /// files that are not at the root (`BatchDescriptors`).
    var descriptors = BatchDescriptors()
    /// The batch sealed before `pending`, on its way to the disk (`seal`, `place`).
    var flushing: Flushing?
    /// Set when this apply creates a directory (a pulled folder, or a missing parent of a
    /// pulled file, or maybe one for a rename that fell back to a pull): every later batch of
    /// the apply then takes `syncfs` for its barriers, whatever its size, and the apply ends
    /// with one more `syncfs` (also when no batch ran a barrier). Per-file barriers flush the
    /// files and the directories they are renamed in, not a new directory's entry in its own
    /// parent: after a crash the file could be gone with its directory while the index
    /// records it as synced, and the next scan would send its deletion to the peers.
    var madeDirectories = false
    /// Records of directories made or updated, waiting to be written together (`storeDirectories`).
    var directoryRecords: [FileRecord] = []
    /// Whether `syncfs` is a barrier on the folder's file system (`DurableNames`): asked once
    /// per apply, not once per directory made, file deleted or batch sealed.
    var syncfsIsBarrier = true
    /// Where sealed batches wait for their fetches and their data barrier, in order.
    let flusher = DispatchQueue(label: "syncpeer.folder.flush")
    /// Makes the renames of placed batches durable and records them, in batch order. Apart
    /// from `flusher`: the next batch's data barrier does not wait for the records of the one
    /// before (B: `io` waited 37–128 ms a run for the two in turn).
    let recorder = DispatchQueue(label: "syncpeer.folder.record")
    /// Left when the last placed batch is recorded. A batch is renamed only once the batch
    /// before it is recorded: after a crash, at most one batch is on disk and not in the
    /// index (the next scan takes it as a local change), as when one queue did both.
    var recording = DispatchGroup()
    /// Placed files are recorded this many per transaction: `io` and the node's queue, which
    /// read the index meanwhile, wait for one slice at most. A whole batch: each commit is a
    /// WAL fdatasync (`synchronous=FULL`) under the index's lock, and that, not the rows, is
    /// what a slice held it for (B under load: 1,000 records ~3 ms of CPU, an fdatasync 3-10
    /// ms, 68 ms at worst), so 256 a slice held it longer in all and as long at once.
    static let recordSlice = batchFiles
    /// Paths to scan again once the apply is done (conflict copies, paths changed here).
    var rescan: [String] = []
    /// Paths whose pull failed in this apply, and why (the folder reports and retries them).
    var failures: [PathKey: FailedPull] = [:]
    /// Path → the state each action of this apply performed so far wants there (its
    /// `PullFailure.version` is made only for a path that fails). Made at the first failure
    /// from `ordered` (then kept up by `noteWanted`): an apply that fails nowhere makes none
    /// (D: 50,000 entries, 0.08 CPU-s of bob).
    var wanted: [PathKey: FileEntry]?
    /// The apply's actions in the order performed, and the one being performed.
    var ordered: [SyncAction] = []
    var performing = -1
    /// Path → the wanted version (`PullFailure.version`) whose chunks a temp file kept from a
    /// failed attempt holds: those that still verify are not fetched again.
    var keptTemps: [PathKey: String] = [:]
    /// Files and links in one batch, at most (each batch has its two barriers and its
    /// records' transaction).
    static let batchFiles = 1_024
    /// Descriptors one batch may hold open (its temporary files, and the directories its files
    /// are in, each handle once: `BatchDescriptors`): a sixteenth of the process's limit on
    /// open files, from 256 to `batchFiles`. Each pulling folder has two batches open at once
    /// (one flushing, one being prepared), and the rest is left for other folders, sessions,
    /// the index and the program around the engine. Up to a limit of 4,096 (a Swift program
    /// that embeds the engine may keep 1,024) that is 256, as before; the daemon raises its
    /// limit (up to 65,536) and gets 1,024 from a limit of 16,384: B's 10,000 files take 10
    /// batches, not 40 (b-ab, 4 interleaved pairs: 1.70 → 1.59 s, bob 1.50 → 1.40 CPU-s).
    static let batchDescriptors: Int = {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 256 }
        return min(batchFiles, max(256, Int(clamping: limit.rlim_cur) / 16))
    }()
    /// Actions whose chunks are looked up in local files at once (`lookUpLocalChunks`): a
    /// window of its own, not a batch, so its hashes stay bounded whatever the batch size.
    static let lookUpActions = 256
    static let batchBytes: Int64 = 64 << 20
    static let inFlightUnit = 16 << 10
    static let inFlightUnits = 1_024   // 16 MiB

    struct Pending: Sendable {
        let directory: DirectoryHandle
        let temp: String
        let name: String
        let state: FileEntry
        let chunks: [FileChunkRecord]
        /// A local file that must become the conflict copy first.
        var conflictCopy: String?
        /// The open temporary file (-1 for links); closed at commit.
        var fd: Int32 = -1
        /// The temporary file's inode, read from `fd` by `flush` (nil for links: read by name).
        var inode: UInt64?
        /// Set when a chunk could not be fetched or written: the file is not committed.
        let failure = FailureFlag()
    }

    /// A chunk to fetch from peers for a pending file; fetched for the whole batch at once.
    struct FetchJob {
        let pending: Int
        let chunk: ChunkRef
        let path: String
        let sources: [String]
        /// Our own older version of the file, when the chunk is asked for as a delta against it.
        let base: DeltaBase?
    }
    var jobs: [FetchJob] = []
    /// Jobs are started in groups of this many as files are prepared, so the fetches of a
    /// batch's first files overlap the preparation of the next ones (before, nothing was
    /// asked for until the whole batch was prepared, and nothing was in flight meanwhile).
    static let launchJobs = 32
    /// In flight: at most `inFlightUnits` units of `inFlightUnit` bytes (a small file's block
    /// takes one unit, a 4 MiB chunk 256), so many small files keep the link busy and big
    /// chunks stay within the memory budget. Only `launch` takes units. (With 64 KiB units,
    /// 256 small files filled the budget: one batch, and the next waited for its answers.)
    let units = DispatchSemaphore(value: FolderApplier.inFlightUnits)
    /// The timeout of a wait that only checks (DISPATCH_TIME_NOW, raw value 0). Not
    /// `.now()`: that is a deadline a few nanoseconds ahead, and a failing wait then sleeps
    /// in the kernel until it passes (~80 µs and a context switch here; B: ~140 times a run).
    static let noWait = DispatchTime(uptimeNanoseconds: 0)
    /// The batch's started fetches (each batch has its own); its flush waits for them.
    var inFlight = DispatchGroup()
    /// Jobs started in this apply (which peer a job asks first rotates with it).
    var launched = 0
    /// When `launch` last looked up the connected peers and their entries.
    var lastRefresh: ContinuousClock.Instant?
    static let refreshInterval = Duration.milliseconds(250)

    init(folder: SharedFolder, host: any FolderHost, index: NodeIndex, local: [PathKey: FileEntry],
         remotes: [PathKey: [String: FileEntry]], manifests: [PathKey: [String: [UInt8]]],
         blocks: consuming [ChunkHash: IndexBlock] = [:]) {
        core = Core(folder: folder, host: host, index: index)
        self.local = local
        self.remotes = remotes
        self.manifests = manifests
        self.blocks = blocks
    }

    func apply(_ actions: [SyncAction]) {
        dispatchPrecondition(condition: .onQueue(folder.io))
        guard let root = try? DirectoryHandle(path: folder.root) else { return }
        syncfsIsBarrier = DurableNames.syncfsIsBarrier(root.fd)
        connected = host.connectedDevices()
        // Directories first (parents before children), deletions last (children first); a
        // directory replaced by a file or link after the deletions (its children go first),
        // so that the empty directory can make way at commit. One pass: each action is of
        // one kind (comparing every action with every other cost 10,000 tombstones ~20 s).
        var creates: [SyncAction] = [], deletes: [SyncAction] = [], replacements: [SyncAction] = [], others: [SyncAction] = []
        for action in actions {
            switch action {
            case let .pull(state, _) where state.kind == .directory && !state.deleted:
                creates.append(action)
            case .delete:
                deletes.append(action)
            case let .pull(state, _) where state.kind != .directory
                && local[PathKey(state.path)].map { $0.kind == .directory && !$0.deleted } == true:
                replacements.append(action)
            default:
                others.append(action)
            }
        }
        creates.sort { $0.paths[0] < $1.paths[0] }
        deletes.sort { $0.paths[0].count > $1.paths[0].count }
        ordered = creates + others + deletes + replacements
        for (n, action) in ordered.enumerated() {
            performing = n
            if n % Self.lookUpActions == 0 { lookUpLocalChunks(ordered[n..<min(n + Self.lookUpActions, ordered.count)]) }
            // Only a file's pull is prepared while the batch before it is flushed: any other
            // action changes the disk now, so the files sealed before it are placed first (as
            // when every batch was committed before the next action).
            if !Self.makesDirectory(action) { storeDirectories() }
            if !Self.preparesOnly(action) { settle(root: root) } else if flushing?.flushed == true { place(root: root) }
            perform(action, root: root)
            if pending.count >= Self.batchFiles || pendingBytes >= Self.batchBytes || descriptors.count >= Self.batchDescriptors {
                seal(root: root)
            }
        }
        storeDirectories()
        seal(root: root)
        dropUsedBlocks()
        settle(root: root)
        if madeDirectories {
            // The folders this apply made, also when no batch after them ran a barrier.
            madeDirectories = false
            if syncFileSystem(root.fd) != 0 { folder.report("cannot flush new folders to disk: \(Self.lastError())") }
        }
        if !rescan.isEmpty {
            // Conflict copies and skipped paths are picked up as local changes.
            let paths = rescan
            rescan = []
            folder.io.async { [folder] in folder.fullScanPaths(paths) }
        }
    }

    /// Where local files hold the chunks the next actions need: one lookup for every
    /// `lookUpActions` actions (so files placed by earlier batches count too, though not those
    /// of the batch still flushing, nor of the one whose records are still being written).
    private func lookUpLocalChunks(_ actions: ArraySlice<SyncAction>) {
        dropUsedBlocks()
        decoded = [:]
        var hashes: [[UInt8]] = []
        for action in actions {
            let wanted: (FileEntry, String)? = switch action {
            case let .pull(state, device), let .conflict(state, device, _, _), let .rename(_, state, device): (state, device)
            default: nil
            }
            guard let (state, device) = wanted, state.kind == .file, !state.deleted,
                  let bytes = manifests[PathKey(state.path)]?[device], let manifest = try? Manifest.decode(bytes) else { continue }
            decoded[PathKey(state.path)] = (device, manifest)
            hashes += manifest.chunks.lazy.filter { self.blocks[$0.hash] == nil }.map(\.hash.bytes)
        }
        // (An index that cannot say: no chunk is copied locally, all come from peers; nothing else.)
        localLocations = hashes.isEmpty ? [:] : (try? index.localChunkLocations(hashes: hashes)) ?? [:]
    }

    /// `device`'s manifest of `path`, decoded by the lookup window if it was (taken from it),
    /// else decoded now; nil when there is none or it does not decode.
    func manifest(of path: String, from device: String) -> Manifest? {
        let key = PathKey(path)
        if let window = decoded.removeValue(forKey: key), window.device == device { return window.manifest }
        guard let bytes = manifests[key]?[device] else { return nil }
        return try? Manifest.decode(bytes)
    }

    private func perform(_ action: SyncAction, root: DirectoryHandle) {
        noteWanted(action)
        switch action {
        case .upToDate:
            return
        case let .pull(state, from):
            pull(state, from: from, root: root, conflictCopy: nil)
        case let .updateMetadata(state, _):
            guard let resolved = try? SafePath(state.path).resolve(under: root), resolved.existing != nil,
                  diskMatchesIndex(state.path, root: root) else { rescan.append(state.path); return }
            if state.kind != .symlink, fchmodat(resolved.directory.fd, resolved.name, mode_t(state.mode & 0o777), 0) != 0 {
                fail(state.path, "cannot change its permissions: \(Self.lastError())")
                return
            }
            guard setTimes(resolved.directory, resolved.name, state.mtimeNs) else {
                fail(state.path, "cannot set its modification time: \(Self.lastError())")
                return
            }
            record(state, root: root)
        case let .delete(state, from):
            delete(state, from: from, root: root)
        case .keepLocal:
            // Our version wins: nothing changes here, and our record keeps its own version.
            // (Recording the merged version would make it dominate the loser's, and the loser
            // would then overwrite its edit instead of keeping it as a conflict copy.)
            return
        case let .conflict(winner, from, loser, copyName):
            let localState = local[PathKey(winner.path)]
            if let localState, !localState.deleted, localState.version == loser.version {
                // Our copy lost: it is kept under the conflict name, the winner takes its place
                // (recorded with the merged version, which then settles every device).
                pull(winner, from: from, root: root, conflictCopy: copyName)
            } else if let localState, !localState.deleted, localState.hasSameContent(as: winner) {
                // Ours is the winner: the losing device makes the copy; keep our version as is.
                return
            } else if winner.deleted {
                delete(winner, from: from, root: root)
            } else {
                pull(winner, from: from, root: root, conflictCopy: nil)
            }
        case let .rename(from, to, source):
            rename(from, to, source: source, root: root)
        }
    }

    // MARK: Commit

    /// True for an action that only prepares a temporary file (or link) until its batch is placed.
    private static func preparesOnly(_ action: SyncAction) -> Bool {
        switch action {
        case let .pull(state, _): state.kind != .directory && !state.deleted   // a file's or a link's temporary
        case .upToDate, .keepLocal: true
        default: false
        }
    }

    /// True for a directory's pull (its record waits in `directoryRecords`).
    private static func makesDirectory(_ action: SyncAction) -> Bool {
        if case let .pull(state, _) = action { state.kind == .directory && !state.deleted } else { false }
    }

    /// Removes the temp file a failed attempt kept for `path`, if any (the path needs
    /// nothing more, or wants another version).
    static func removeKeptTemp(_ path: String, root: String) {
        guard let handle = try? DirectoryHandle(path: root), let resolved = try? SafePath(path).resolve(under: handle) else { return }
        unlinkat(resolved.directory.fd, tempName(forPath: path), 0)
    }
}

/// A failure set from several threads (the first one set stays).
final class FailureFlag: Sendable {
    private let first = Mutex<PullFailure?>(nil)
    func set(_ failure: PullFailure) { first.withLock { if $0 == nil { $0 = failure } } }
    var value: PullFailure? { first.withLock { $0 } }
    var isSet: Bool { value != nil }
}

/// syncfs(2): flushes the whole file system holding `fd` (not exported by the Glibc module).
@_silgen_name("syncfs") func syncFileSystem(_ fd: Int32) -> Int32
