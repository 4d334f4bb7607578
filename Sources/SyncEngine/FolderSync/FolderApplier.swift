#if canImport(Glibc)
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
final class FolderApplier: @unchecked Sendable {
    // @unchecked: used on the folder's `io` queue; the block-fetch callbacks that run
    // elsewhere (the node's queue, `verifyQueue`, several at once) only call `verified`,
    // `write(_:at:_:)` (pwrite and sync_file_range on a descriptor) and `fetch`, which touch
    // immutable state, the locked activity counters and the failure flags. `flusher` runs
    // `flush` (which touches only its `Flushing`); `recorder` runs the records' jobs of
    // `place` (the index, immutable state, the activity counters and the locked `stored`).
    let folder: SharedFolder
    let host: any FolderHost
    let index: NodeIndex
    let local: [PathKey: FileState]
    /// Path → device → that peer's state (what the plan was made from).
    let remotes: [PathKey: [String: FileState]]
    let manifests: [PathKey: [String: [UInt8]]]
    /// Small files' content that came with the peers' index pages (verified), by hash: written
    /// as it is, neither looked up in local files nor asked for. A written block goes at the
    /// next lookup window (`lookUpLocalChunks`: files of the same content in that window use
    /// it too; a later one's hash is looked up in local files again), with its share of the
    /// node's budget (`releasedBlockCost`): waiting pages then keep theirs.
    private var blocks: [ChunkHash: IndexBlock]
    /// Blocks written since the last lookup window.
    private var usedBlocks: [ChunkHash] = []
    /// What the written blocks gave back of `FolderHost.indexBlockBudget`.
    private(set) var releasedBlockCost = 0
    /// Peers connected at the start of the apply, refreshed by `launch` (at most every
    /// `refreshInterval`).
    private var connected: Set<String> = []
    /// Chunk hash → where local files hold it (looked up for every `lookUpActions` actions; files
    /// placed since by this apply may hold other content there now: `LocalSource.holds`).
    var localLocations: [[UInt8]: [ChunkLocation]] = [:]
    let folderID: String
    /// Replaced versions left at their temporary names by `placeOver`, removed at the end
    /// of the batch's commit.
    var outgoing: [(directory: DirectoryHandle, name: String)] = []
    /// Paths whose local version the caller kept in the versions store already (`revert`):
    /// `keepVersion` does not keep them twice.
    var keptBefore: Set<PathKey> = []
    /// Files assembled and waiting for the batch barrier.
    private var pending: [Pending] = []
    private var pendingBytes: Int64 = 0
    /// Descriptors `pending` holds open: its temporary files, and the directory of each file
    /// that is not at the root.
    private var pendingDescriptors = 0
    /// The batch sealed before `pending`, on its way to the disk (`seal`, `place`).
    private var flushing: Flushing?
    /// Set when this apply creates a directory (a pulled folder, or a missing parent of a
    /// pulled file, or maybe one for a rename that fell back to a pull): every later batch of
    /// the apply then takes `syncfs` for its barriers, whatever its size, and the apply ends
    /// with one more `syncfs` (also when no batch ran a barrier). Per-file barriers flush the
    /// files and the directories they are renamed in, not a new directory's entry in its own
    /// parent: after a crash the file could be gone with its directory while the index
    /// records it as synced, and the next scan would send its deletion to the peers.
    var madeDirectories = false
    /// Where sealed batches wait for their fetches and their data barrier, in order.
    private let flusher = DispatchQueue(label: "syncpeer.folder.flush")
    /// Makes the renames of placed batches durable and records them, in batch order. Apart
    /// from `flusher`: the next batch's data barrier does not wait for the records of the one
    /// before (B: `io` waited 37–128 ms a run for the two in turn).
    private let recorder = DispatchQueue(label: "syncpeer.folder.record")
    /// Left when the last placed batch is recorded. A batch is renamed only once the batch
    /// before it is recorded: after a crash, at most one batch is on disk and not in the
    /// index (the next scan takes it as a local change), as when one queue did both.
    private var recording = DispatchGroup()
    /// Placed files are recorded this many per transaction: `io` and the node's queue, which
    /// read the index meanwhile, wait for one slice at most (a batch of 1,024 held the
    /// index's lock ~20 ms).
    static let recordSlice = 256
    /// Records `recorder` stored for placed batches, or why it could not (taken in by `settle`).
    private let stored = Mutex<[(records: [FileRecord], failure: String?)]>([])
    /// Paths to scan again once the apply is done (conflict copies, paths changed here).
    var rescan: [String] = []
    /// Paths whose pull failed in this apply, and why (the folder reports and retries them).
    private(set) var failures: [PathKey: FailedPull] = [:]
    /// Path → the state each action of this apply wants there (its `PullFailure.version`
    /// is made only for a path that fails).
    private var wanted: [PathKey: FileState] = [:]
    /// Path → the wanted version (`PullFailure.version`) whose chunks a temp file kept from a
    /// failed attempt holds: those that still verify are not fetched again.
    var keptTemps: [PathKey: String] = [:]
    /// Peers that answered a delta request whole: they do not speak `block-delta`.
    private let plainPeers = Mutex<Set<String>>([])
    /// Set when the disk is full: the batch's remaining chunks are not fetched.
    private let diskFull = FailureFlag()
    /// Files and links in one batch, at most (each batch has its two barriers and its
    /// records' transaction).
    static let batchFiles = 1_024
    /// Descriptors one batch may hold open (its temporary files, and the directory of each file
    /// not at the root): a sixteenth of the process's limit on open files, from 256 to
    /// `batchFiles`. Each pulling folder has two batches open at once (one flushing, one being
    /// prepared), and the rest is left for other folders, sessions, the index and the program
    /// around the engine. Up to a limit of 4,096 (a Swift program that embeds the engine may
    /// keep 1,024) that is 256, as before; the daemon raises its limit (up to 65,536) and gets
    /// 1,024 from a limit of 16,384: B's 10,000 files take 10 batches, not 40 (b-ab, 4
    /// interleaved pairs: 1.70 → 1.59 s, bob 1.50 → 1.40 CPU-s).
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
        let state: FileState
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
    private var jobs: [FetchJob] = []
    /// Jobs are started in groups of this many as files are prepared, so the fetches of a
    /// batch's first files overlap the preparation of the next ones (before, nothing was
    /// asked for until the whole batch was prepared, and nothing was in flight meanwhile).
    static let launchJobs = 32
    /// In flight: at most `inFlightUnits` units of `inFlightUnit` bytes (a small file's block
    /// takes one unit, a 4 MiB chunk 256), so many small files keep the link busy and big
    /// chunks stay within the memory budget. Only `launch` takes units. (With 64 KiB units,
    /// 256 small files filled the budget: one batch, and the next waited for its answers.)
    private let units = DispatchSemaphore(value: FolderApplier.inFlightUnits)
    /// The timeout of a wait that only checks (DISPATCH_TIME_NOW, raw value 0). Not
    /// `.now()`: that is a deadline a few nanoseconds ahead, and a failing wait then sleeps
    /// in the kernel until it passes (~80 µs and a context switch here; B: ~140 times a run).
    static let noWait = DispatchTime(uptimeNanoseconds: 0)
    /// The batch's started fetches (each batch has its own); its flush waits for them.
    private var inFlight = DispatchGroup()
    /// Jobs started in this apply (which peer a job asks first rotates with it).
    private var launched = 0
    /// When `launch` last looked up the connected peers and their entries.
    private var lastRefresh: ContinuousClock.Instant?
    static let refreshInterval = Duration.milliseconds(250)

    init(folder: SharedFolder, host: any FolderHost, index: NodeIndex, local: [PathKey: FileState],
         remotes: [PathKey: [String: FileState]], manifests: [PathKey: [String: [UInt8]]],
         blocks: consuming [ChunkHash: IndexBlock] = [:]) {
        self.folder = folder
        self.host = host
        self.index = index
        self.local = local
        self.remotes = remotes
        self.manifests = manifests
        self.blocks = blocks
        folderID = folder.id
    }

    func apply(_ actions: [SyncAction]) {
        guard let root = try? DirectoryHandle(path: folder.root) else { return }
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
        let ordered = creates + others + deletes + replacements
        for (n, action) in ordered.enumerated() {
            if n % Self.lookUpActions == 0 { lookUpLocalChunks(ordered[n..<min(n + Self.lookUpActions, ordered.count)]) }
            // Only a file's pull is prepared while the batch before it is flushed: any other
            // action changes the disk now, so the files sealed before it are placed first (as
            // when every batch was committed before the next action).
            if !Self.preparesOnly(action) { settle(root: root) } else if flushing?.flushed == true { place(root: root) }
            perform(action, root: root)
            if pending.count >= Self.batchFiles || pendingBytes >= Self.batchBytes || pendingDescriptors >= Self.batchDescriptors {
                seal(root: root)
            }
        }
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
        var hashes: [[UInt8]] = []
        for action in actions {
            let wanted: (FileState, String)? = switch action {
            case let .pull(state, device), let .conflict(state, device, _, _), let .rename(_, state, device): (state, device)
            default: nil
            }
            guard let (state, device) = wanted, state.kind == .file, !state.deleted,
                  let bytes = manifests[PathKey(state.path)]?[device], let manifest = try? Manifest.decode(bytes) else { continue }
            hashes += manifest.chunks.lazy.filter { self.blocks[$0.hash] == nil }.map(\.hash.bytes)
        }
        localLocations = hashes.isEmpty ? [:] : (try? index.localChunkLocations(hashes: hashes)) ?? [:]
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

    // MARK: Pull

    func pull(_ state: FileState, from device: String, root: DirectoryHandle, conflictCopy: String?) {
        guard let safe = try? SafePath(state.path) else { return }
        if local[PathKey(state.path)] != nil, conflictCopy == nil, !diskMatchesIndex(state.path, root: root) {
            rescan.append(state.path)  // changed here since the last scan: scan it first
            return
        }
        // A parent missing here (deleted, while a peer kept or made this entry in it) is made again.
        let found = try? safe.resolve(under: root)
        let parentsMissing = found == nil
        let resolved: ResolvedPath
        if let found { resolved = found } else {
            do {
                resolved = try safe.resolve(under: root, createDirectories: true)
            } catch {
                fail(state.path, "cannot create its folder: \(error.description)")
                return
            }
        }
        if parentsMissing {
            madeDirectories = true
            rescanRecreatedParents(of: state.path)
        }
        let temp = Self.tempName(forPath: state.path)
        switch state.kind {
        case .directory:
            pullDirectory(state, resolved, conflictCopy: conflictCopy, root: root)
        case .symlink:
            if unlinkat(resolved.directory.fd, temp, 0) != 0 && errno != ENOENT {
                fail(state.path, "cannot remove the old temporary link: \(Self.lastError())")
                return
            }
            guard symlinkat(state.symlinkTarget ?? "", resolved.directory.fd, temp) == 0 else {
                fail(state.path, "cannot create the link: \(Self.lastError())")
                return
            }
            // The link's own time, as the peer has it (the scanner compares targets only).
            guard setTimes(resolved.directory, temp, state.mtimeNs) else {
                fail(state.path, "cannot set the link's modification time: \(Self.lastError())")
                unlinkat(resolved.directory.fd, temp, 0)
                return
            }
            add(Pending(directory: resolved.directory, temp: temp, name: resolved.name, state: state, chunks: [],
                        conflictCopy: conflictCopy), root: root)
        case .file:
            guard let bytes = manifests[PathKey(state.path)]?[device], let manifest = try? Manifest.decode(bytes),
                  manifest.rootHash == (state.rootHash ?? []) else {
                failed(state.path, PullFailure(.badData, "its peer sent no valid manifest for it"))
                return
            }
            // A temp file kept from a failed attempt at this version is reused (its chunks
            // that verify are not fetched again); any other one is emptied.
            let reuse = keptTemps[PathKey(state.path)].map { $0 == PullFailure.version(of: state) } ?? false
            let fd = openat(resolved.directory.fd, temp, O_RDWR | O_CREAT | (reuse ? 0 : O_TRUNC) | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                failed(state.path, .writing(errno, "cannot create its temporary file \(temp)"))
                return
            }
            let (missing, failure) = copyLocalChunks(manifest, of: state.path, into: fd, reusingTemp: reuse)
            if let failure {
                close(fd)
                failed(state.path, failure)
                if failure.failure != .diskFull { unlinkat(resolved.directory.fd, temp, 0) }
                return
            }
            let sources = missing.isEmpty ? [] : devices(holding: state)
            if !missing.isEmpty && sources.isEmpty {
                close(fd)   // kept: what it holds is not fetched again
                failed(state.path, PullFailure(.peerUnavailable, "no connected peer has it"))
                return
            }
            if !missing.isEmpty {
                let needed = missing.reduce(Int64(0)) { $0 + Int64($1.size) }
                folder.activity.begin(path: state.path, size: Int64(manifest.fileSize), needed: needed, peers: sources)
                host.emitFile(folder, state.path, .syncing, bytes: needed, total: Int64(manifest.fileSize), copy: nil, reason: nil)
            }
            var item = Pending(directory: resolved.directory, temp: temp, name: resolved.name, state: state, chunks: manifest.chunkRecords,
                               conflictCopy: conflictCopy)
            item.fd = fd
            add(item, root: root)
            // What our own file holds where it lacks a chunk is compared block by block
            // (`BlockDelta`): after a change in place, only the changed blocks travel.
            let base = local[PathKey(state.path)].map { !$0.deleted && $0.kind == .file } == true && missing.contains(where: DeltaBase.worthIt)
                ? DeltaBase(resolved.directory, resolved.name) : nil
            if base != nil { pendingDescriptors += 1 }
            for chunk in missing {
                jobs.append(FetchJob(pending: pending.count - 1, chunk: chunk, path: state.path, sources: sources,
                                     base: DeltaBase.worthIt(chunk) ? base : nil))
            }
            pendingBytes += Int64(manifest.fileSize)
            if jobs.count >= Self.launchJobs { launch() }
        }
    }

    /// Adds an assembled file to the batch, counting the descriptors it holds open.
    private func add(_ item: Pending, root: DirectoryHandle) {
        pending.append(item)
        pendingDescriptors += (item.fd >= 0 ? 1 : 0) + (item.directory === root ? 0 : 1)
    }

    /// Peers that are connected and have exactly this content for the path.
    private func devices(holding state: FileState) -> [String] {
        holders(of: state, in: remotes[PathKey(state.path)] ?? [:])
    }

    /// Connected peers whose entry (device → state) has exactly this content.
    private func holders(of state: FileState, in entries: [String: FileState]) -> [String] {
        entries.filter { !$0.value.deleted && $0.value.rootHash == state.rootHash && connected.contains($0.key) }.map(\.key).sorted()
    }

    /// Sizes the file and writes every chunk that came with the index (`blocks`) or that some
    /// local file already holds (or, with `reusingTemp`, that the temp file holds already and
    /// that verifies); returns the
    /// chunks still missing, or why the file cannot be written. Chunks of files that are
    /// still what the index recorded are copied in the kernel, unread (`LocalSource`).
    private func copyLocalChunks(_ manifest: Manifest, of path: String, into fd: Int32, reusingTemp: Bool) -> (missing: [ChunkRef], failure: PullFailure?) {
        // A new temp file of one chunk gets its size from that chunk's write (B: 10,000 calls).
        if reusingTemp || manifest.chunks.count > 1, ftruncate(fd, off_t(manifest.fileSize)) != 0 {
            return ([], .writing(errno, "cannot size its temporary file"))
        }
        let sources = LocalSources()
        var runs: [CopyRun] = []
        var missing: [ChunkRef] = []
        for chunk in manifest.chunks {
            if reusingTemp, Self.holds(fd, chunk) {
                folder.activity.reused(bytes: Int(chunk.size))
                continue
            }
            if let block = indexBlock(chunk) {
                let error = write(block.bytes, at: chunk.offset, fd)
                guard error == 0 else { return ([], .writing(error, "cannot write its temporary file")) }
                folder.activity.fetched(path: path, from: block.device, bytes: block.bytes.count)
                continue
            }
            switch localPlan(chunk, sources: sources) {
            case let .copy(source, from):
                Self.append(chunk, from: from, of: source, to: &runs)
            case let .bytes(bytes):
                let error = write(bytes, at: chunk.offset, fd)
                guard error == 0 else { return ([], .writing(error, "cannot write its temporary file")) }
                folder.activity.reused(bytes: bytes.count)
            case nil:
                missing.append(chunk)
            }
        }
        let copied = copy(runs, into: fd)
        guard copied.error == 0 else { return ([], .writing(copied.error, "cannot write its temporary file")) }
        return (missing + copied.missing, nil)
    }

    /// The block that came with an index page for `chunk`: this pull's, or one of a page
    /// still waiting, whose entries this pull may have planned (a whole pass; a page stores
    /// its entries just before it waits), taken from it.
    private func indexBlock(_ chunk: ChunkRef) -> IndexBlock? {
        if let block = blocks[chunk.hash], block.bytes.count == Int(chunk.size) {
            usedBlocks.append(chunk.hash)
            return block
        }
        guard chunk.size <= UInt32(SharedFolder.indexBlockLimit) else { return nil }
        return folder.takeWaitingBlock(chunk.hash, size: Int(chunk.size))
    }

    /// Lets the blocks written so far go, and their share of the node's budget.
    private func dropUsedBlocks() {
        for hash in usedBlocks {
            guard let block = blocks.removeValue(forKey: hash) else { continue }
            let cost = SharedFolder.heldCost(block.bytes.count)
            host.indexBlockBudget.release(cost)
            releasedBlockCost += cost
        }
        usedBlocks = []
    }

    /// Starts fetching the queued chunks from peers, many at a time across all files (many
    /// small files do not wait for each other), spread over the peers that hold each file.
    /// Blocks only while the in-flight budget is used up.
    private func launch() {
        guard !jobs.isEmpty else { return }
        // Peers may have connected (or gone) and sent their index since the plan: every
        // connected peer that holds a file's content now serves its blocks (multi-source).
        // Looked up at most every `refreshInterval`: asking waits for the node's queue, which
        // is busy with the answers (B: 0.5 s of bob's 4.7 s when asked for every 32 jobs).
        var fresh: [PathKey: [String: FileState]] = [:]
        let time = ContinuousClock.now
        if lastRefresh.map({ time - $0 >= Self.refreshInterval }) ?? true {
            lastRefresh = time
            connected = host.connectedDevices()
            fresh = ((try? index.remoteFiles(folderID: folderID, paths: jobs.map(\.path).pathKeys.map(\.string), keyedBy: PathKey.init(_:))) ?? [:])
                .mapValues { $0.mapValues(FileState.init) }
        }
        let units = units
        let group = inFlight
        // Asked for together (`requestBlocks`), and before waiting for the budget: what they
        // hold of it comes back only with their answers.
        var wants: [BlockWant] = []
        defer { host.requestBlocks(wants) }
        for job in jobs {
            let item = pending[job.pending]
            if item.failure.isSet { continue }
            if let full = diskFull.value {
                // Nothing more fits: what is fetched now would be thrown away.
                item.failure.set(full)
                continue
            }
            // A delta's answer is assembled in a copy of our own bytes: it counts twice (a chunk
            // over 8 MiB, alone in flight, can hold twice the budget: 32 MiB at most).
            let weight = min(Self.inFlightUnits, max(1, (Int(job.chunk.size) + Self.inFlightUnit - 1) / Self.inFlightUnit) * (job.base == nil ? 1 : 2))
            for _ in 0..<weight where units.wait(timeout: Self.noWait) == .timedOut {
                host.requestBlocks(wants)
                wants = []
                units.wait()
            }
            group.enter()
            let fd = item.fd
            let now = holders(of: item.state, in: fresh[PathKey(job.path)] ?? [:])
            launched += 1
            let want = want(job.chunk, path: job.path, sources: now.isEmpty ? job.sources : now, attempt: launched, base: job.base) {
                (bytes: [UInt8]?, lied: Bool) in
                defer {
                    for _ in 0..<weight { units.signal() }
                    group.leave()
                }
                guard let bytes else {
                    item.failure.set(lied ? PullFailure(.badData, "a peer answered with data that does not match its hash")
                                          : PullFailure(.peerUnavailable, "its peers did not answer (disconnected?)"))
                    return
                }
                let error = self.write(bytes, at: job.chunk.offset, fd)
                if error == 0 && job.chunk.size >= Self.largeBlock {
                    // Start its writeback now (no wait): the batch's barrier then finds a large
                    // file nearly all on disk, instead of writing it all at the end (A-share:
                    // 1.1 s with both peers idle after the last block, for 1 GiB).
                    _ = syncFileRange(fd, Int64(job.chunk.offset), Int64(job.chunk.size), syncFileRangeWrite)
                }
                if error != 0 {
                    let failure = PullFailure.writing(error, "cannot write its temporary file")
                    item.failure.set(failure)
                    if failure.failure == .diskFull { self.diskFull.set(failure) }
                }
            }
            if let want { wants.append(want) }
        }
        jobs = []
    }

    /// Asks the peers in turn (starting at a different one per chunk) until one answers
    /// with bytes that match the hash; the completion gets nil when none did, and whether a
    /// peer answered with bytes that do not match. With a `base`, the chunk is asked for as
    /// a delta against what it holds at that range (when it still holds the whole range).
    private func fetch(_ chunk: ChunkRef, path: String, sources: [String], attempt: Int, tries: Int = 0, lied: Bool = false,
                       base: DeltaBase?, whole: Bool = false, completion: @escaping @Sendable ([UInt8]?, Bool) -> Void) {
        if let want = want(chunk, path: path, sources: sources, attempt: attempt, tries: tries, lied: lied, base: base, whole: whole,
                           completion: completion) {
            host.requestBlocks([want])
        }
    }

    /// `fetch`'s request to the next peer to ask, or nil when every peer was asked (the
    /// completion has then been called). `launch` sends many at once.
    private func want(_ chunk: ChunkRef, path: String, sources: [String], attempt: Int, tries: Int = 0, lied: Bool = false,
                      base: DeltaBase?, whole: Bool = false, completion: @escaping @Sendable ([UInt8]?, Bool) -> Void) -> BlockWant? {
        guard tries < sources.count else { completion(nil, lied); return nil }
        let device = sources[(attempt + tries) % sources.count]
        // Not summed for a peer that answered a delta request whole (it does not speak
        // `block-delta`: the sums would be read and hashed for nothing).
        let sums = whole || plainPeers.withLock({ $0.contains(device) }) ? nil : base?.sums(chunk)
        return BlockWant(device: device, folder: folderID, path: path, offset: chunk.offset, size: chunk.size,
                         hash: chunk.hash.bytes, sums: sums) { [self] reply in
            if sums != nil, case .whole = reply { plainPeers.withLock { _ = $0.insert(device) } }
            // The answer arrives on the node's queue: a large block is hashed and written
            // elsewhere, several at once (a 4 MiB block was ~4 ms of SHA-256 before BLAKE3, which held the
            // node's queue and kept a large pull to one core); a small one is not worth the hop.
            let answer: @Sendable () -> Void = { [self] in
                verified(reply, chunk, path: path, device: device, sources: sources, attempt: attempt, tries: tries, lied: lied,
                         base: base, completion: completion)
            }
            // (A delta, or the next try's sums, reads our own file: never on the node's queue.)
            if chunk.size >= Self.largeBlock || base != nil { Self.verifyQueue.async(execute: answer) } else { answer() }
        }
    }

    /// Blocks of at least this size are verified and written on `verifyQueue`, and their
    /// writeback is started as soon as they are written.
    static let largeBlock: UInt32 = 256 << 10

    /// Verifies and writes fetched blocks (concurrent; the in-flight budget bounds the work).
    static let verifyQueue = DispatchQueue(label: "syncpeer.folder.verify", qos: .utility, attributes: .concurrent)

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
            fetch(chunk, path: path, sources: sources, attempt: attempt, tries: tries + 1, lied: lied || bytes != nil,
                  base: base, completion: completion)
        }
    }

    /// Writes all of `bytes` at `offset`; 0, or the errno of the failure. Any thread (block
    /// callbacks): it touches nothing but the descriptor.
    private func write(_ bytes: [UInt8], at offset: UInt64, _ fd: Int32) -> Int32 {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(offset) + off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return n == 0 ? ENOSPC : errno }
            done += n
        }
        return 0
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

    /// A sealed batch: its fetches end, then its temporaries are closed and flushed on
    /// `flusher`; `io` reads what came out only after waiting for `done`.
    final class Flushing: @unchecked Sendable {
        // @unchecked: `ready` and `failures` are written on `flusher` before `done` is left,
        // and read on `io` after it has waited for `done`.
        let items: [Pending]
        /// Made durable file by file (`syncsPerFile`), not by `syncfs`.
        let perFile: Bool
        let done = DispatchGroup()
        var ready: [Pending] = []
        /// Paths that cannot be placed, and why (recorded on `io` by `place`).
        var failures: [(path: String, failure: PullFailure)] = []
        init(_ items: [Pending], perFile: Bool) {
            self.items = items
            self.perFile = perFile
        }
        var flushed: Bool { done.wait(timeout: FolderApplier.noWait) == .success }

        /// Drops an assembled file: its temporary goes, the path keeps what it had.
        func drop(_ item: Pending, _ reason: String) {
            unlinkat(item.directory.fd, item.temp, 0)
            failures.append((item.state.path, PullFailure(.unwritable, reason)))
        }
    }

    /// Ends the batch being prepared: its remaining fetches start, and once they have all
    /// ended, `flusher` closes and flushes its temporaries while `io` prepares the next batch
    /// (before, `io` sat idle through the batch's last round trips and its data barrier). The
    /// batch sealed before it is placed first, so at most two batches are open at once.
    private func seal(root: DirectoryHandle) {
        guard !pending.isEmpty else { return }
        launch()
        place(root: root)
        let batch = Flushing(pending, perFile: Self.syncsPerFile(items: pending.count, madeDirectories: madeDirectories,
                                                                 syncfsIsBarrier: DurableNames.syncfsIsBarrier(root.fd)))
        let fetches = inFlight
        inFlight = DispatchGroup()
        pending = []
        pendingBytes = 0
        pendingDescriptors = 0
        batch.done.enter()
        flusher.async {
            fetches.wait()
            Self.flush(batch, root: root)
            batch.done.leave()
        }
        flushing = batch
    }

    /// A batch of at most this many files is made durable file by file (`fsync` of each, and
    /// of each directory after the renames) instead of by `syncfs`: a `syncfs` waits
    /// for every dirty page of the whole file system, so a large file pulled while another
    /// program writes to the same disk would wait for that program's data too (0.47 s of
    /// 2.4 s in A-share, where it was the source file of the same run). More files than this,
    /// and one `syncfs` costs less than a device flush per file.
    static let perFileSyncLimit = 4

    /// Whether a batch of `items` files and links is made durable file by file
    /// (`perFileSyncLimit`): only while the apply has made no directory (`madeDirectories`),
    /// and always where `syncfs` is no barrier (FUSE: see `DurableNames`; each directory
    /// made was fsynced into its parent then).
    static func syncsPerFile(items: Int, madeDirectories: Bool, syncfsIsBarrier: Bool = true) -> Bool {
        !syncfsIsBarrier || (!madeDirectories && items <= perFileSyncLimit)
    }

    /// The barrier for the data of the whole batch: one `syncfs`, or an `fsync` of each file
    /// of a small batch (on `flusher`; it touches only the batch).
    private static func flush(_ batch: Flushing, root: DirectoryHandle) {
        for item in batch.items {
            guard item.fd >= 0 else { batch.ready.append(item); continue }
            if let failure = item.failure.value {
                close(item.fd)
                // Kept for the next attempt unless it can never be used.
                if failure.failure == .unwritable { unlinkat(item.directory.fd, item.temp, 0) }
                batch.failures.append((item.state.path, failure))
                continue
            }
            // Mode and mtime last: writing would change the mtime again.
            var times = [timespec(tv_sec: 0, tv_nsec: Self.utimeOmit),
                         timespec(tv_sec: Int(item.state.mtimeNs / 1_000_000_000), tv_nsec: Int(item.state.mtimeNs % 1_000_000_000))]
            let problem: String? = if fchmod(item.fd, mode_t(item.state.mode & 0o777)) != 0 {
                "cannot set the permissions of its temporary file: \(Self.lastError())"
            } else if futimens(item.fd, &times) != 0 {
                "cannot set the modification time of its temporary file: \(Self.lastError())"
            } else if batch.perFile, fsync(item.fd) != 0 {  // fsync, not fdatasync: the mode and mtime too
                "cannot flush its data to disk: \(Self.lastError())"
            } else { nil }
            // The inode the file is recorded with (off `io`, which read it by name before).
            var st = stat()
            var ready = item
            if fstat(item.fd, &st) == 0 { ready.inode = UInt64(st.st_ino) }
            // close() is where some file systems (NFS, FUSE) report a failed write.
            let closed = close(item.fd) == 0
            if let problem {
                batch.drop(item, problem)
            } else if !closed {
                batch.drop(item, "writing its temporary file failed: \(Self.lastError())")
            } else {
                batch.ready.append(ready)
            }
        }
        // Without the data on disk a crash could leave a torn file behind a rename.
        if !batch.perFile, !batch.ready.isEmpty, syncFileSystem(root.fd) != 0 {
            let reason = "cannot flush its data to disk: \(Self.lastError())"
            for item in batch.ready { batch.drop(item, reason) }
            batch.ready = []
        }
    }

    /// Waits until the sealed batch is flushed, then puts its files in place (on `io`), with
    /// one barrier for the renames before they are recorded.
    private func place(root: DirectoryHandle) {
        takeStored()
        guard let batch = flushing else { return }
        flushing = nil
        batch.done.wait()
        recording.wait()
        for (path, failure) in batch.failures { failed(path, failure) }
        let ready = batch.ready
        // Each placed file with the inode it was renamed with (read before the rename: later,
        // the user may have put another file there).
        var done: [(item: Pending, inode: UInt64?)] = []
        // The directory was opened when the pull was planned, maybe seconds ago: if the user
        // has moved or deleted it since, the handle still reaches it, wherever it is now, and
        // nothing may go into it (see `directoryInPlace`). Checked once per directory of the
        // batch before its renames and once after them (B: 10,000 files in one directory
        // were four opens and lookups each).
        var inPlace = DirectoryChecks(), stillInPlace = DirectoryChecks()
        for item in ready {
            guard inPlace.check(item.directory, of: item.state.path, self) else {
                unlinkat(item.directory.fd, item.temp, 0)
                rescan.append(item.state.path)
                continue
            }
            let placedInode = item.inode ?? inode(item.directory, item.temp)
            // What should be at a path the plan knew: the version the index records now (nil:
            // nothing). A path the plan did not know needs no read: nothing may be replaced there.
            var expected: FileRecord?
            if item.conflictCopy == nil, local[PathKey(item.state.path)] != nil {
                do { expected = try index.file(folderID: folderID, path: item.state.path).flatMap { $0.deleted ? nil : $0 } } catch {
                    discard(item, "cannot read what the index records for it: \(error)")
                    continue
                }
            }
            let placement: PlaceOutcome
            if let copy = item.conflictCopy {
                // The local version is kept first; if it cannot be, the winner waits.
                guard keepAsConflictCopy(item.directory, item.name, copy: copy, path: item.state.path) else {
                    unlinkat(item.directory.fd, item.temp, 0)
                    continue
                }
                placement = item.directory.placeNew(item.temp, as: item.name)
            } else if let expected {
                if expected.kind == .directory {
                    // A synced directory becomes a file or link only once empty (its children
                    // were deleted first); anything still inside stays, with the directory.
                    if item.directory.entryKind(item.name) == .directory,
                       unlinkat(item.directory.fd, item.name, AT_REMOVEDIR) != 0, errno != ENOENT {
                        discard(item, "the folder in its place cannot be removed: \(Self.lastError())")
                        rescan.append(item.state.path)
                        continue
                    }
                    placement = item.directory.placeNew(item.temp, as: item.name)
                } else if !entry(item.name, in: item.directory, is: expected) {
                    // Edited here while the content was fetched: the edit is not replaced; it
                    // is scanned, and then a conflict keeps both.
                    placement = .changedHere
                } else {
                    placement = placeOver(item.temp, at: item.name, in: item.directory, path: item.state.path, expected: expected)
                }
            } else {
                // Nothing known here: anything that appeared since the plan stays, and is scanned.
                placement = item.directory.placeNew(item.temp, as: item.name)
            }
            switch placement {
            case .done:
                done.append((item, placedInode))
            case .changedHere:
                unlinkat(item.directory.fd, item.temp, 0)
                rescan.append(item.state.path)
            case .failed(let code):
                discard(item, "cannot put it in place: \(String(cString: strerror(code)))")
            case .stranded:
                break   // placeOver keeps it
            }
        }
        // Moved away between the check and a rename: what we put there is taken back (the
        // peer still has it; the path is planned again once the move is scanned).
        done.removeAll { placed in
            guard !stillInPlace.check(placed.item.directory, of: placed.item.state.path, self) else { return false }
            takeBack(placed.item, inode: placed.inode)
            return true
        }
        // The barrier for the renames, then the records: on `recorder`, while `io` goes on
        // (`settle` waits for it before anything reads what the batch recorded).
        // Only records and names go along: the batch's descriptors close here.
        let records = done.map { $0.item.state.fileRecord(folderID: folderID, inode: $0.inode, chunks: $0.item.chunks) }
        let replaced = outgoing
        outgoing = []
        let paths = batch.items.map(\.state.path)
        // A small batch flushes the directories it renamed in (their handles go along), a
        // large one the whole file system (see `perFileSyncLimit`).
        var seen = Set<ObjectIdentifier>()
        let renamedIn = batch.perFile ? done.map(\.item.directory).filter { seen.insert(ObjectIdentifier($0)).inserted } : nil
        let recorded = DispatchGroup()
        recording = recorded
        recorded.enter()
        recorder.async { [self] in
            defer { recorded.leave() }
            if !records.isEmpty {
                var failure: String?
                for directory in renamedIn ?? [root] {
                    let result = renamedIn == nil ? syncFileSystem(directory.fd) : fsync(directory.fd)
                    if result != 0 { failure = failure ?? Self.lastError() }
                }
                if let failure { folder.report("cannot flush the renames of \(records.count) file(s) to disk: \(failure)") }
            }
            var failure: String?
            for first in stride(from: 0, to: records.count, by: Self.recordSlice) {
                let slice = Array(records[first..<min(records.count, first + Self.recordSlice)])
                // After a failed slice the rest fail the same way, without a busy timeout each.
                failure = failure ?? upsert(slice)
                stored.withLock { $0.append((slice, failure)) }
            }
            for old in replaced { unlinkat(old.directory.fd, old.name, 0) }
            folder.activity.end(paths: paths)
        }
    }

    /// Takes a placed file back out of a directory that was moved while the batch was placed
    /// (`place`). Only what is still exactly ours goes (same inode, size and mtime: a user's
    /// edit since stays); a version it replaced (left at the temporary name for `outgoing`)
    /// is swapped back to its name and kept, never removed with the batch's outgoing ones.
    private func takeBack(_ item: Pending, inode placedInode: UInt64?) {
        defer { rescan.append(item.state.path) }
        let replaced = outgoing.firstIndex { $0.directory === item.directory && $0.name == item.temp }
        if let replaced { outgoing.remove(at: replaced) }
        let record = item.state.fileRecord(folderID: folderID, inode: placedInode, chunks: item.chunks)
        guard let placedInode, inode(item.directory, item.name) == placedInode, entry(item.name, in: item.directory, is: record) else {
            return   // not ours any more (or unknown): it stays, and so does what it replaced
        }
        if replaced == nil {
            unlinkat(item.directory.fd, item.name, 0)
        } else if item.directory.exchange(item.name, item.temp) {
            unlinkat(item.directory.fd, item.temp, 0)   // ours, now at the temporary name
        }
    }

    /// Places the sealed batch and waits until `recorder` has recorded every placed batch,
    /// then takes in what came of it (on `io`): before any action that is not a file's or a
    /// link's pull, and at the end of the apply.
    private func settle(root: DirectoryHandle) {
        place(root: root)
        recorder.sync {}
        takeStored()
    }

    /// Takes in what `recorder` recorded so far (on `io`; also from `place`, so the records
    /// of a long pull do not pile up until its end).
    private func takeStored() {
        let results: [(records: [FileRecord], failure: String?)] = stored.withLock { all in
            defer { all = [] }
            return all
        }
        for (records, failure) in results { takeIn(records, failure: failure) }
    }

    /// Drops an assembled file that cannot be put in place: its temporary goes, the path
    /// keeps what it had, and the failure is reported.
    private func discard(_ item: Pending, _ reason: String) {
        unlinkat(item.directory.fd, item.temp, 0)
        fail(item.state.path, reason)
    }

    // MARK: Failures

    /// Notes the version each path of `action` should end up with (what a failure is for).
    func noteWanted(_ action: SyncAction) {
        let states: [FileState] = switch action {
        case .upToDate, .keepLocal: []
        case let .pull(state, _), let .updateMetadata(state, _), let .delete(state, _): [state]
        case let .conflict(winner, _, _, _): [winner]
        case let .rename(from, to, _): [from, to]
        }
        for state in states { wanted[PathKey(state.path)] = state }
    }

    /// A path that could not be applied because a place cannot be written (a rename, link,
    /// permission or index write failed): the folder reports it once per change, lists it in
    /// its status with the reason until a later pull of it succeeds, and tries it again
    /// when it changes or at the next rescan. The path keeps what it had.
    func fail(_ path: String, _ reason: String) {
        failed(path, PullFailure(.unwritable, reason))
    }

    /// A pull of `path` failed: the folder reports it (once per change) and retries it as
    /// the kind of failure says (see `PullRetry`). The first failure of a path in an apply stays.
    func failed(_ path: String, _ failure: PullFailure) {
        let key = PathKey(path)
        guard failures[key] == nil else { return }
        failures[key] = FailedPull(failure: failure, version: wanted[key].map(PullFailure.version) ?? "")
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
