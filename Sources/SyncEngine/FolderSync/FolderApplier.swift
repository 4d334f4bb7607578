#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import Foundation
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
    /// Replaced versions left at their temporary names by `placeOver`, removed at the end
    /// of the batch's commit.
    var outgoing: [(directory: DirectoryHandle, name: String)] = []
    /// Paths whose local version the caller kept in the versions store already (`revert`):
    /// `keepVersion` does not keep them twice.
    var keptBefore: Set<PathKey> = []
    /// Files assembled and waiting for the batch barrier.
    var pending: [Pending] = []
    var pendingBytes: Int64 = 0
    /// Descriptors `pending` holds open: its temporary files, and the directory of each file
    /// that is not at the root.
    var pendingDescriptors = 0
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
    /// read the index meanwhile, wait for one slice at most (a batch of 1,024 held the
    /// index's lock ~20 ms).
    static let recordSlice = 256
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
    var inFlight = DispatchGroup()
    /// Jobs started in this apply (which peer a job asks first rotates with it).
    private var launched = 0
    /// When `launch` last looked up the connected peers and their entries.
    private var lastRefresh: ContinuousClock.Instant?
    static let refreshInterval = Duration.milliseconds(250)

    init(folder: SharedFolder, host: any FolderHost, index: NodeIndex, local: [PathKey: FileState],
         remotes: [PathKey: [String: FileState]], manifests: [PathKey: [String: [UInt8]]],
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
                let error = Self.write(block.bytes, at: chunk.offset, fd)
                guard error == 0 else { return ([], .writing(error, "cannot write its temporary file")) }
                folder.activity.fetched(path: path, from: block.device, bytes: block.bytes.count)
                continue
            }
            switch localPlan(chunk, sources: sources) {
            case let .copy(source, from):
                Self.append(chunk, from: from, of: source, to: &runs)
            case let .bytes(bytes):
                let error = Self.write(bytes, at: chunk.offset, fd)
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
    func launch() {
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
        let diskFull = core.diskFull
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
            let want = core.want(job.chunk, path: job.path, sources: now.isEmpty ? job.sources : now, attempt: launched, base: job.base) {
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
                let error = Self.write(bytes, at: job.chunk.offset, fd)
                if error == 0 && job.chunk.size >= Self.largeBlock {
                    // Start its writeback now (no wait): the batch's barrier then finds a large
                    // file nearly all on disk, instead of writing it all at the end (A-share:
                    // 1.1 s with both peers idle after the last block, for 1 GiB).
                    _ = syncFileRange(fd, Int64(job.chunk.offset), Int64(job.chunk.size), syncFileRangeWrite)
                }
                if error != 0 {
                    let failure = PullFailure.writing(error, "cannot write its temporary file")
                    item.failure.set(failure)
                    if failure.failure == .diskFull { diskFull.set(failure) }
                }
            }
            if let want { wants.append(want) }
        }
        jobs = []
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
