#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// One shared folder on this node: scanning, watching and applying what peers changed.
///
///     inotify (FolderWatcher) ─┐                       ┌─▶ index (files, sequence) ─▶ peers (indexUpdate)
///     periodic full scan ──────┼─▶ io: FolderScanner ──┘
///     peer indexUpdate ────────┴─▶ io: SyncPlanner ─▶ pull (local chunks first, then blockRequest
///                                     to every connected peer holding the content) ─▶ temp files
///                                     ─▶ one durability barrier per batch ─▶ renames ─▶ index
///
/// All disk work for the folder runs on its serial `io` queue, so a scan never races a pull;
/// block requests from peers are served on `serveQueue`, so two nodes pulling from each
/// other never wait on each other's `io`.
final class SharedFolder: Sendable {
    let id: String
    let root: String
    let label: String
    let io: DispatchQueue
    let serveQueue: DispatchQueue
    weak let host: (any FolderHost)?
    /// What the folder works with, behind one lock (see `State`): the watcher, the ignore
    /// patterns, the timers, the root's checks, the retry table, the roles, the mass-change
    /// guard, and what status shows.
    let state = Mutex(State())
    /// Any thread: the same patterns, for serving blocks (which never waits for `io`); nil
    /// until they are first loaded, and nothing is served before.
    let servedIgnores = Mutex<IgnorePatterns?>(nil)
    /// Any thread: paused by the user (`pause`, kept in the index): no scan and no pull run
    /// until `resume-folder`, which scans and pulls everything.
    let paused = Atomic<Bool>(false)
    /// Any thread: files in flight and bytes moved per peer, for `syncpeer status`.
    let activity = FolderActivity()
    /// Chunks of files being fetched: ours (served to members) and what members say they hold.
    let held = HeldChunks()
    /// Files found damaged while serving them (`SharedFolder+Damage`).
    let damaged = DamagedFiles()
    /// Large files our scans hash, told to members while hashed; members' fetched ahead (SharedFolder+Growing).
    let growing = GrowingFiles()
    let prefetch = Prefetches()
    /// The ignore patterns as serving reads them, in force from the next request (SharedFolder+Serving).
    let servedRules = ServedRules()
    /// The schedule of served bytes under the test knob `SYNCPEER_SERVE_RATE`.
    let pacer = ServePacer()
    /// Quick sums of the chunks of large files, so that a change re-hashes only what changed.
    let chunkSums = ChunkSumCache()
    /// Any thread: what status shows of `retry`.
    let failing = FailingPaths()
    /// Names that equal another under Unicode normalization (read by the control thread).
    let nameTwins = NameTwinsReport()
    /// Any thread: the mass change the folder holds, asking the user (status, dashboard).
    let massHold = Mutex<MassChangeGuard.Hold?>(nil)
    /// Any thread: the roles' differences last counted for `status` (SharedFolder+RoleCounts).
    let roleCountCache = Mutex<SharedFolder.RoleCountCache?>(nil)
    /// How a rescan's changes are planned again, a page at a time (SharedFolder+PagedPull).
    let rescanReplan = RescanReplan()

    init(id: String, root: String, label: String, host: any FolderHost) {
        self.id = id
        self.root = root
        self.label = label
        self.host = host
        io = DispatchQueue(label: "syncpeer.folder.\(id)")
        serveQueue = DispatchQueue(label: "syncpeer.folder.\(id).serve", attributes: .concurrent)
    }

    var index: NodeIndex? { host?.index }

    /// The index setting that keeps a folder paused across restarts.
    static func pausedSetting(_ id: String) -> String { "folder_paused." + id }

    // MARK: - Life

    /// Scans, starts watching, pulls what peers have that we lack, and rescans periodically.
    /// The timer ticks at least every `rootPollInterval`: a stopped folder resumes soon
    /// after its root is back, and a root replaced without an inotify event (a disk mounted
    /// over it) stops the folder before the next pull.
    func start(rescanInterval: Duration, watchDelay: Duration) {
        let rescanSeconds = Double(rescanInterval.components.seconds) + Double(rescanInterval.components.attoseconds) / 1e18
        state.withLock { state in
            state.rescanSeconds = rescanSeconds
            state.watchDelay = watchDelay
            state.ticking = true
        }
        if (try? host?.index.setting(Self.pausedSetting(id))) == "1" {
            paused.store(true, ordering: .relaxed)
            setStatus(.idle)  // shown as paused
        }
        io.async { [self] in
            loadIgnores()
            removeLeftoverTemporaries()
            // Watch first, then scan: a change made after the scan passed a file but before
            // a watch existed was missed until the next periodic rescan (chaos seed 1005: an
            // append 50 ms after a restart stayed on its node while every status said 100 %).
            startWatcher(delay: watchDelay)
            fullScan()
            pull(paths: nil)
        }
        let tick = min(rescanSeconds, Self.rootPollInterval)
        scheduleTick(at: .now() + tick, every: tick)
    }

    /// The periodic `tick` on `io`, at `deadline` and then every `interval` on that fixed
    /// schedule (as a repeating timer: ticks missed while one ran long are not made up),
    /// until `stop`.
    private func scheduleTick(at deadline: DispatchTime, every interval: Double) {
        io.asyncAfter(deadline: deadline) { [weak self] in
            guard let self, state.withLock({ $0.ticking }) else { return }
            tick()
            let step = max(interval, 0.001)
            let late = Double(DispatchTime.now().uptimeNanoseconds) - Double(deadline.uptimeNanoseconds)
            scheduleTick(at: deadline + step * (floor(max(0, late) / (step * 1e9)) + 1), every: interval)
        }
    }

    func stop() {
        state.withLock { $0.ticking = false }
        prefetch.removeAll()
        forgetWaitingPulls()
        io.sync {
            state.withLock { $0.retryTimer &+= 1 }
            dropWatcher()
        }
    }

    func loadIgnores() {
        dispatchPrecondition(condition: .onQueue(io))
        // The selection (`syncpeer select`) rides on the patterns: what lies outside is ignored.
        let stored = storedSelection()
        let loaded = (try? DirectoryHandle(path: root)).flatMap { try? IgnorePatterns.load(from: $0) }
        let (ignores, watcher) = state.withLock { state in
            let selection = stored ?? state.ignores.selection
            if let loaded { state.ignores = loaded }
            state.ignores.selection = selection
            return (state.ignores, state.watcher)
        }
        watcher?.updateIgnores(ignores)
        servedIgnores.withLock { $0 = ignores }
    }

    /// Temporary files a killed daemon left (before the first pull of this run, so none is
    /// in use).
    private func removeLeftoverTemporaries() {
        guard let handle = try? DirectoryHandle(path: root) else { return }
        for (path, reason) in FolderApplier.removeLeftoverTemporaries(under: handle) {
            report("cannot remove the leftover temporary file \(path): \(reason)")
        }
    }

    func startWatcher(delay: Duration) {
        dispatchPrecondition(condition: .onQueue(io))
        let (watching, stopped, ignores) = state.withLock { ($0.watcher != nil, $0.stopped, $0.ignores) }
        guard !watching, stopped == nil else { return }
        do {
            let watcher = try FolderWatcher(root: root, ignores: ignores, delay: delay, maxDelay: nil, quickDelay: nil, watchLimit: nil,
                                            onBatch: { [weak self] batch in
                guard let self else { return }
                self.io.async { self.watched(batch.changes, newestEventNs: batch.newestEventNs) }
            })
            state.withLock { $0.watcher = watcher }
        } catch {
            report("cannot watch \(root): \(error.description); falling back to periodic scans")
        }
    }

    private func watched(_ changes: [WatchChange], newestEventNs: Int64) {
        dispatchPrecondition(condition: .onQueue(io))
        var paths: [String] = []
        var moves: [(from: String, to: String)] = []
        var full = false
        for change in changes {
            switch change {
            case let .changed(path): paths.append(path)
            case let .renamed(from, to): moves.append((from, to))   // both paths also come as .changed
            case .rootGone:
                rootGone()
                return
            case .overflow: full = true
            case let .watchLimitReached(message):
                report("inotify watch limit reached: \(message); this folder falls back to periodic full scans")
            }
        }
        if let at = paths.firstIndex(of: IgnorePatterns.fileName) {
            paths.remove(at: at)   // never synced: the change only reloads the patterns
            loadIgnores()
        }
        if full {
            fullScan()
            // Events were lost: the marks whose reports went with them would stay (up to
            // `PlacedFiles.limit`, ~10 MiB) until a later report of each path; the scan
            // has just compared every file with the index anyway.
            state.withLock { $0.placed.forgetAll() }
        } else {
            paths = notScannedSince(needingScan(paths), newestEventNs: newestEventNs)
            if !paths.isEmpty { scan(paths: paths, moves: moves) }
        }
        removeStrandedTemporaries(moves.map(\.to))
    }

    /// A directory the user moved carries the temp files that failed pulls kept in it, for
    /// paths at its old place: nothing would ever use or remove them.
    private func removeStrandedTemporaries(_ movedTo: [String]) {
        guard !movedTo.isEmpty, let handle = try? DirectoryHandle(path: root) else { return }
        let failing = state.withLock { $0.retry.entries.keys.map(\.string) }
        for relative in movedTo {
            for (path, reason) in FolderApplier.removeStrandedTemporaries(under: handle, movedTo: relative, failing: failing) {
                report("cannot remove the stranded temporary file \(path): \(reason)")
            }
        }
    }

    /// What the index knew at each renamed path (a file, or every file below a folder),
    /// under the new path the kernel reported for it: such files are not read again if they
    /// are still the same (inode, size, mtime).
    private func renamedFiles(_ moves: [(from: String, to: String)], index: NodeIndex) -> [ScannedEntry] {
        var found: [ScannedEntry] = []
        func take(_ record: FileRecord, at path: String) {
            guard record.kind == .file, !record.deleted, let inode = record.inode, let manifest = record.manifest else { return }
            found.append(ScannedEntry(path: path, kind: .file, size: record.size, mtimeNs: record.mtimeNs,
                                    mode: record.mode, inode: inode, manifest: manifest))
        }
        for (from, to) in moves where found.count < Self.maxMovedFiles {
            // (Best effort: what the index cannot say is read again from the disk, nothing more.)
            if let record = (try? index.file(folderID: id, path: from)) ?? nil {
                if record.kind == .file { take(record, at: to) }
                if record.kind != .directory { continue }
            }
            // A folder: every file that was below it, a page at a time, in path order.
            var after = from + "/"
            while found.count < Self.maxMovedFiles {
                let page = (try? index.files(folderID: id, afterPath: after, limit: 200)) ?? []
                let below = page.prefix { $0.path.hasPrefix(from + "/") }
                for record in below { take(record, at: to + record.path.dropFirst(from.count)) }
                if below.count < page.count || page.count < 200 { break }
                after = page[page.count - 1].path
            }
        }
        return found
    }

    /// Files taken over from renames per scan; beyond that, files are read again (each
    /// holds its manifest in memory until the scan ends).
    static let maxMovedFiles = 20_000

    // MARK: - Scanning (io)

    /// Walks the whole folder; unchanged files (size, mtime, inode) are not read.
    func fullScan() {
        dispatchPrecondition(condition: .onQueue(io))
        // The patterns on disk now: a change the watcher missed (overflow, no watches left,
        // periodic scans only) applies from this scan on.
        loadIgnores()
        scan(paths: nil)
    }

    /// Rescans some paths (conflict copies, paths changed during a pull).
    func fullScanPaths(_ paths: [String]) {
        dispatchPrecondition(condition: .onQueue(io))
        scan(paths: paths)
    }

    /// Scans the whole folder (`paths` nil) or some paths. The root is checked first; the
    /// additions and changes are recorded batch by batch, the deletions only once the scan
    /// has seen everything and the mass-deletion guard agrees (`recordDeletions`).
    private func scan(paths: [String]?, moves: [(from: String, to: String)] = []) {
        state.withLock { $0.watcher }?.readQueuedEvents()   // what happened before this scan is in a batch it covers
        let startedNs = WatchBatch.now()
        guard !paused.load(ordering: .relaxed), let index, checkRoot() else { return }
        // A stopped folder resumes only after a whole scan passed the guard.
        if paths != nil, stopped != nil { return scan(paths: nil) }
        if paths == nil { state.withLock { $0.lastFullScan = .now() } }
        // A confirmation (`syncpeer confirm`) holds for one whole scan.
        defer { if paths == nil { state.withLock { $0.deletionsConfirmed = false } } }
        setStatus(.scanning)
        let before: LiveTotals
        // (A rescan of some paths plans its changes again: those recorded past this sequence.)
        let firstSequence: Int64
        do { (before, firstSequence) = (try index.liveTotals(folderID: id), try index.maxSequence(folderID: id)) } catch {
            report("scan of \(root) not started: cannot read the index: \(error)")
            return
        }
        let known = KnownEntriesWithMoves(base: IndexKnownEntries(index: index, folderID: id),
                                          moved: moves.isEmpty ? [] : renamedFiles(moves, index: index))
        let (ignores, rootIdentity) = state.withLock { ($0.ignores, $0.rootIdentity) }
        var scanner = FolderScanner(root: root, ignores: ignores, expectedRoot: rootIdentity)
        scanner.maxBatchSize = Self.scanBatchCeiling
        scanner.chunkSums = chunkSums
        scanner.growingFrom = growing.threshold.load(ordering: .relaxed)
        scanner.onGrowing = { [weak self] event in self?.grew(event) }
        var wroteChanges = false
        // Held until the scan knows its totals (paths only: a deletion needs nothing else).
        var deletions: [String] = []
        do {
            let onBatch: (ScanBatch) throws -> Void = { [self] batch in
                deletions += batch.deleted
                if try apply(batch, index: index) {
                    wroteChanges = true
                    // Peers start pulling while a long first scan goes on.
                    host?.folderChanged(id)
                }
            }
            let summary = if let paths {
                try scanner.scan(paths: paths, known: known, onBatch: onBatch)
            } else {
                try scanner.scan(known: known, onBatch: onBatch)
            }
            activity.scanned(bytes: summary.bytesRead)
            if let message = nameTwins.record(summary, whole: paths == nil) { report(message) }
            if paths == nil, state.withLock({ state in defer { state.recoversVanished = false }; return state.recoversVanished }) {
                try forgetVanished(deletions, index: index)
                deletions = []
            }
            if try recordDeletions(deletions, before: before, index: index) {
                wroteChanges = true
            }
            resumeIfStopped()
            noteScanCompleted(paths: paths, startedNs: startedNs)
        } catch let error as ScanError {
            // A root that vanished during the scan stops the folder (checkRoot says why).
            if case .rootMissing = error, !checkRoot() { return }
            report("scan of \(root) failed: \(error)")
            return
        } catch let refusal as MassDeletionGuard.Refusal {
            stop(.deletions, refusal.description + "; if you really deleted them, run 'syncpeer confirm \(root)'")
            if wroteChanges { host?.folderChanged(id) }
            return
        } catch {
            report("scan of \(root) failed: \(error)")
        }
        setStatus(.idle)
        if wroteChanges {
            host?.folderChanged(id)
            // A local change may conflict with a version a peer sent earlier (while this
            // change was not scanned yet): plan those paths again.
            if paths != nil { pullChanges(after: firstSequence, index: index) }
        }
    }

    /// Turns the additions and changes of one batch of scan results into new local records
    /// (our counter incremented); its deletions wait for the end of the scan.
    private func apply(_ batch: ScanBatch, index: NodeIndex) throws -> Bool {
        guard !batch.added.isEmpty || !batch.changed.isEmpty, let host else { return false }
        var found = batch.added + batch.changed
        let recoversVanished = self.recoversVanished
        if recoversVanished {
            let rolledBack = try takeRolledBack(found, index: index)
            found.removeAll { rolledBack.contains(PathKey($0.path)) }
        }
        state.withLock { [found] in $0.placed.forget(found.lazy.map(\.path)) }
        var manifests: [PathKey: PeerFiles.ScannedEntry] = [:]
        for entry in found { manifests[PathKey(entry.path)] = entry }
        let present = found.map { entry in
            FileEntry(path: entry.path, kind: entry.kind, size: entry.size, mtimeNs: entry.mtimeNs,
                      mode: entry.mode, symlinkTarget: entry.symlinkTarget, version: [:], rootHash: entry.manifest?.rootHash,
                      modifiedBy: host.localDevice)
        }
        let olds: [PathKey: FileRecord]
        do { olds = try index.files(folderID: id, paths: present.map(\.path), keyedBy: PathKey.init(_:)) } catch {
            report("cannot read the records of scanned files: \(error)")
            return false
        }
        func chunks(_ path: String) -> [FileChunkRecord] {
            manifests[PathKey(path)]?.manifest?.chunkRecords ?? []
        }
        // A record with stale hashes (see FileRecord.manifest) whose size, mtime and mode are
        // still those recorded holds the same content (the scanner's test of an unchanged
        // file, less the inode): it gets the new hashes under its version, so no peer sees
        // an edit nobody made. Anything else is judged as any change.
        var rows: [FileRecord] = []
        var rest: [FileEntry] = []
        let placedBeforeCut = recoversVanished ? try placedBeforeTheCut(present, olds: olds, index: index) : [:]
        for entry in present {
            if let placed = placedBeforeCut[PathKey(entry.path)] {
                var row = placed
                row.chunks = chunks(entry.path)
                row.inode = manifests[PathKey(entry.path)]?.inode
                rows.append(row)
            } else if entry.kind == .file, let old = olds[PathKey(entry.path)], old.hasStaleHashes, old.size == entry.size,
               old.mtimeNs == entry.mtimeNs, old.mode == entry.mode, let root = entry.rootHash {
                var row = old
                row.rootHash = root
                row.chunks = chunks(entry.path)
                row.inode = manifests[PathKey(entry.path)]?.inode
                rows.append(row)
            } else {
                rest.append(entry)
            }
        }
        let scanResult = LocalScanResult(rootPresent: true, present: rest)
        let changes = LocalChanges(localDevice: host.localDevice)
        switch changes.records(for: scanResult, old: { path in olds[PathKey(path)].map(\.entry) }, deletedAtNs: Self.nowNs()) {
        case let .failure(refusal): throw refusal
        case let .success(list):
            rows += list.map { state in FileRecord(folderID: id, state, inode: manifests[PathKey(state.path)]?.inode, chunks: chunks(state.path)) }
        }
        guard !rows.isEmpty else { return false }
        // A recorded file overwritten here: its content is gone from the disk (issue 41).
        host.versions?.noteLost(rows.compactMap { row in
            olds[PathKey(row.path)].flatMap { $0.kind == .file && $0.rootHash != row.rootHash ? $0 : nil }
        }, reason: "local-edit")
        do { _ = try index.upsertFiles(rows) } catch { report("cannot record changes: \(error)") ; return false }
        return true
    }

    // MARK: - Pulling (io)

    /// Since when what pulls changed here waits to be announced to peers (`announcePulled`).
    private let pulledUnannounced = Mutex<ContinuousClock.Instant?>(nil)
    /// Pages of paths peers changed that wait for a pull (in arrival order, each with the
    /// bytes of its entries, the small files' content that came with it and the peer that
    /// sent it), whether a pull of them is queued on `io`, and how many such pulls ran and
    /// paths they planned (for tests).
    private let peerChanges = Mutex<PeerChanges>(PeerChanges())
    struct PeerChanges {
        var pages: [(paths: Set<PathKey>, bytes: Int, blocks: [ChunkHash: IndexBlock], blockBytes: Int, device: String?, taken: (@Sendable () -> Void)?)] = []
        var queued = false
        var pulls = 0
        var plannedPaths = 0
    }
    var peerPulls: Int { peerChanges.withLock { $0.pulls } }
    /// Paths that pulls of some paths gave the planner (for tests): those a peer has an
    /// entry for, less a peer's echo of our own entries.
    var peerPlannedPaths: Int { peerChanges.withLock { $0.plannedPaths } }
    /// A pull takes whole waiting pages up to this many paths and `pullBytes` bytes of
    /// their entries (at least one page): their records and manifests are loaded together.
    /// (At 4,000 paths, B's 10,000 files took five pulls, and each pull's planning and its
    /// drained pipeline at the end cost ~0.1 s: 1.79 → 1.63 s with one limit of 10,000.)
    static let pullBatch = 10_000
    static let pullBytes = 16 << 20

    /// Pulls `paths` a peer changed (one index page, `bytes` of entries, with `blocks`: the
    /// content of small files that came with it), soon (any thread). Pages that arrive while
    /// a pull runs wait and go together in the next one, whole and in the order they came,
    /// up to `pullBatch` paths and `pullBytes`: each pull ends by waiting for its last
    /// fetches, barriers and records, and before, every page (100 … 1,000 entries) paid that
    /// wait on its own (B: 12 pulls for 10,000 files). A page is never split, so what one
    /// page held together (a folder's deletion with its children's, a rename's two halves)
    /// is still planned together. A page's blocks are kept only within the node's
    /// `indexBlockBudget`. `device` sent the page: its entries that change nothing here (its
    /// echo of ours, `withoutEchoes`) are stored but not planned. `taken` runs once a pull
    /// takes the page, or at once if no block is kept.
    func pullSoon(_ paths: Set<PathKey>, bytes: Int = 0, blocks: [ChunkHash: IndexBlock] = [:], from device: String? = nil,
                  taken: @escaping @Sendable () -> Void = {}) {
        let size = blocks.values.reduce(0) { $0 + Self.heldCost($1.bytes.count) }
        let keep = size > 0 && host?.indexBlockBudget.hold(size) == true
        let queue = peerChanges.withLock { pending in
            pending.pages.append((paths, bytes, keep ? blocks : [:], keep ? size : 0, device, keep ? taken : nil))
            defer { pending.queued = true }
            return !pending.queued
        }
        if !keep { taken() }
        if queue { io.async { [self] in pullWaiting() } }
    }

    private func pullWaiting() {
        dispatchPrecondition(condition: .onQueue(io))
        var (pages, blocks, blockBytes, more, calls) = peerChanges.withLock { pending in
            var pages: [(paths: Set<PathKey>, device: String?)] = []
            var blocks: [ChunkHash: IndexBlock] = [:]
            var (count, bytes, blockBytes) = (0, 0, 0)
            for page in pending.pages {
                if !pages.isEmpty && (count + page.paths.count > Self.pullBatch || bytes + page.bytes > Self.pullBytes) { break }
                pages.append((page.paths, page.device))
                count += page.paths.count
                blocks.merge(page.blocks) { first, _ in first }
                bytes += page.bytes
                blockBytes += page.blockBytes
            }
            let calls = pending.pages.prefix(pages.count).map(\.taken)
            pending.pages.removeFirst(pages.count)
            pending.queued = !pending.pages.isEmpty
            return (pages, blocks, blockBytes, pending.queued, calls)
        }
        for call in calls { call?() }
        let batch = withoutEchoes(pages)
        peerChanges.withLock { $0.pulls += batch.isEmpty ? 0 : 1 }
        // The blocks are the pull's alone (each goes soon after it is written: the applier's
        // `dropUsedBlocks`); what they held and the pull did not give back goes here.
        if !batch.isEmpty { blockBytes -= pull(paths: batch, blocks: consume blocks) }
        if blockBytes > 0 { host?.indexBlockBudget.release(blockBytes) }
        if more { io.async { [self] in pullWaiting() } }
        // A pull that planned nothing, or pages dropped: what an earlier pull owes goes now.
        if pulledUnannounced.withLock({ $0 != nil }) { announcePulled() }
    }

    /// Tells the peers what pulls changed here (`folderChanged`: they get our new entries)
    /// once no more pulls wait. While they do, the announcement waits, at most
    /// `announceDelay`: a timer sends it then, also in the middle of a long pull. Each peer
    /// stores and plans the entries it sent us: in B, the echo of bob's second pull (2,400
    /// files) took ~0.1 s of alice's CPU while bob's last pull needed both cores.
    func announcePulled() {
        let waiting = peerChanges.withLock { !$0.pages.isEmpty }
        let startTimer = pulledUnannounced.withLock { since -> Bool in
            guard waiting else {
                since = nil
                return false
            }
            guard since == nil else { return false }   // owed already: its timer runs
            since = .now
            return true
        }
        if !waiting {
            host?.folderChanged(id)
        } else if startTimer {
            DispatchQueue.global().asyncAfter(deadline: .now() + Self.announceDelay) { [weak self] in
                guard let self, pulledUnannounced.withLock({ since in defer { since = nil }; return since != nil }) else { return }
                host?.folderChanged(id)
            }
        }
    }
    static let announceDelay = DispatchTimeInterval.seconds(2)

    /// Drops the pages waiting for a pull (the folder stops; a restart pulls every path).
    func forgetWaitingPulls() {
        let (held, taken) = peerChanges.withLock { pending in
            defer { pending.pages = [] }
            return (pending.pages.reduce(0) { $0 + $1.blockBytes }, pending.pages.map(\.taken))
        }
        for call in taken { call?() }
        if held > 0 { host?.indexBlockBudget.release(held) }
    }

    /// Plans and applies what peers changed, for `paths` (or every path), with the small
    /// files' content that came with their index pages.
    /// Returns what the blocks it was given gave back of the node's `indexBlockBudget` once
    /// written (the caller gives back the rest).
    @discardableResult
    func pull(paths: Set<PathKey>?, blocks: consuming [ChunkHash: IndexBlock] = [:]) -> Int {
        dispatchPrecondition(condition: .onQueue(io))
        guard stopped == nil, !paused.load(ordering: .relaxed), let index, let host, checkRoot() else { return 0 }
        // An index that cannot be read stops the pull before anything is planned (an empty
        // answer reads as "not here": a file overwritten or deleted); see SharedFolder+IndexFailure.
        let plan: Plan
        do throws(IndexError) {
            let members = Set(try index.folderPeers(folderID: id).map(\.deviceID))
            try loadPolicies(index: index)
            if let paths { plan = try planPaths(paths, index: index, members: members) } else { plan = try planAll(index: index, members: members) }
        } catch { return indexFailed("the pull", error) }
        indexRead()
        settleFailures(considered: paths, planned: plan.actions)
        guard !plan.actions.isEmpty else { return 0 }
        // A whole pass (a rescan) leaves out what waits for free space (the probe retries it).
        let wanted: [SyncAction]
        do {
            // (A copy, gone before `recordOutcome` changes the table: no copy of it is made.)
            let retry = state.withLock { $0.retry }
            wanted = paths != nil || retry.isEmpty ? plan.actions : plan.actions.filter { !$0.paths.allSatisfy { retry.waitsForSpace(PathKey($0)) } }
        }
        guard !wanted.isEmpty else { return 0 }
        let actions = SyncPlanner.planRenames(wanted, local: plan.local)
        do throws(IndexError) { guard try admitsMassChange(actions, local: plan.local, index: index) else { return 0 } } catch {
            return indexFailed("the pull", error)
        }
        setStatus(.syncing)
        let applier = FolderApplier(folder: self, host: host, index: index, local: plan.local, remotes: plan.remotes,
                                    manifests: plan.manifests, blocks: blocks)
        applier.keptTemps = keptTemps
        applier.apply(actions)
        recordOutcome(applier.failures, actions: actions)
        countTwins(among: actions.flatMap(\.paths))
        setStatus(.idle)
        announcePulled()
        return applier.releasedBlockCost
    }

    /// The block of `hash` (of `size` bytes) from a page still waiting for its pull, taken
    /// from it with its share of the node's budget: a pull that planned that page's entries
    /// (a whole pass, such as a folder's first pull while the peer's first pages arrive)
    /// writes the file from it instead of asking for it. On `io`.
    func takeWaitingBlock(_ hash: ChunkHash, size: Int) -> IndexBlock? {
        let taken: IndexBlock? = peerChanges.withLock { pending in
            for n in pending.pages.indices where pending.pages[n].blockBytes > 0 {
                guard let block = pending.pages[n].blocks[hash], block.bytes.count == size else { continue }
                pending.pages[n].blocks[hash] = nil
                pending.pages[n].blockBytes -= Self.heldCost(size)
                return block
            }
            return nil
        }
        if taken != nil { host?.indexBlockBudget.release(Self.heldCost(size)) }
        return taken
    }

    /// What to do, with the local states and the peers' manifests of the paths concerned.
    struct Plan {
        var actions: [SyncAction] = []
        var local: [PathKey: FileEntry] = [:]
        /// Path → device → that peer's state, for the paths with something to do.
        var remotes: [PathKey: [String: FileEntry]] = [:]
        var manifests: [PathKey: [String: [UInt8]]] = [:]
    }

    /// Paths the peers have (or had) this many at a time when planning every path.
    static let planPage = 500

    private func planPaths(_ paths: Set<PathKey>, index: NodeIndex, members: Set<String>) throws(IndexError) -> Plan {
        var plan = Plan()
        // Two batched lookups (one read transaction each): the peers' entries, then our
        // records of the paths they have. A path no peer has needs nothing (the planner keeps
        // our state): after a scan of 50,000 new files (D), reading and planning them cost
        // alice 4.6 % of her CPU.
        let found = try index.remoteFiles(folderID: id, paths: paths.lazy.map(\.string), keyedBy: PathKey.init(_:))
        peerChanges.withLock { $0.plannedPaths += found.count }
        guard !found.isEmpty else { return plan }
        plan.local = try index.files(folderID: id, paths: found.keys.lazy.map(\.string), includeChunks: false,
                                     keyedBy: PathKey.init(_:)).mapValues(\.entry)
        (plan.remotes, plan.manifests) = Self.peerStates(found.lazy.flatMap { $0.value.lazy.map { ($0.key, $0.value) } }, members: members)
        plan.remotes = admitted(notIgnored(plan.remotes), local: plan.local)
        plan.actions = SyncPlanner(localDevice: host?.localDevice).plan(local: plan.local, remotes: plan.remotes)
        return plan
    }

    /// Every path, a page of the peers' paths at a time: a path no peer has needs nothing,
    /// so only local records of the peers' paths are read, and only the states and manifests
    /// of paths with something to do are kept. The actions come in the order of one
    /// planning pass over all paths.
    private func planAll(index: NodeIndex, members: Set<String>) throws(IndexError) -> Plan {
        var plan = Plan()
        let planner = SyncPlanner(localDevice: host?.localDevice)
        var after: String?
        while true {
            let page = try index.remoteFiles(folderID: id, afterPath: after, pathLimit: Self.planPage)
            guard let last = page.last?.record.path else { break }
            let (remotes, manifests) = Self.peerStates(page.map { ($0.0, $0.1) }, members: members)
            var local: [PathKey: FileEntry] = [:]
            var localAfter = after
            while case let records = try index.files(folderID: id, afterPath: localAfter, throughPath: last,
                                                     limit: Self.planPage, includeChunks: false),
                  let end = records.last?.path {
                for record in records where remotes[PathKey(record.path)] != nil { local[PathKey(record.path)] = record.entry }
                localAfter = end
            }
            for action in planner.plan(local: local, remotes: admitted(notIgnored(remotes), local: local)) {
                plan.actions.append(action)
                for path in action.paths.map(PathKey.init(_:)) {
                    if let state = local[path] { plan.local[path] = state }
                    if let states = remotes[path] { plan.remotes[path] = states }
                    if let manifest = manifests[path] { plan.manifests[path] = manifest }
                }
            }
            after = last
        }
        plan.actions.sort { PathKey($0.paths[0]) < PathKey($1.paths[0]) }
        return plan
    }

    /// The members' entries (device, entry) as path → device → state, and their manifests.
    static func peerStates(_ entries: some Sequence<(String, RemoteFileRecord)>, members: Set<String>)
        -> (states: [PathKey: [String: FileEntry]], manifests: [PathKey: [String: [UInt8]]]) {
        var states: [PathKey: [String: FileEntry]] = [:]
        var manifests: [PathKey: [String: [UInt8]]] = [:]
        for (device, remote) in entries where members.contains(device) {
            states[PathKey(remote.path), default: [:]][device] = remote.entry
            if let manifest = remote.manifest { manifests[PathKey(remote.path), default: [:]][device] = manifest }
        }
        return (states, manifests)
    }

    /// Paths our ignore patterns exclude are never pulled.
    private func notIgnored(_ remotes: [PathKey: [String: FileEntry]]) -> [PathKey: [String: FileEntry]] {
        let ignores = self.ignores
        return remotes.filter { path, states in
            !ignores.isIgnored(path.string, isDirectory: states.values.contains { $0.kind == .directory })
        }
    }

    // MARK: - Status

    /// Sets the state shown by status; "idle" while some paths fail says so instead. A
    /// change is an event (`syncpeer events`); the same state again is not.
    func setStatus(_ value: FolderState) {
        host?.queue.async { [self] in
            let shown = paused.load(ordering: .relaxed) ? .paused : value == .idle ? failing.state ?? value : value
            let changed = state.withLock { state in
                guard state.error == nil, shown != state.status else { return false }
                state.status = shown
                return true
            }
            if changed { host?.emitFolder(self, reason: nil) }
        }
    }

    func setError(_ message: String) {
        host?.queue.async { [self] in
            state.withLock { state in
                state.status = .error
                state.error = message
            }
            recordError(message)
            host?.emitFolder(self, reason: message)
        }
    }

    /// Clears the folder's error (`only`: if it is still that one).
    func clearError(only shown: String? = nil) {
        host?.queue.async { [self] in
            let cleared = state.withLock { state in
                guard shown == nil || state.error == shown else { return false }
                state.error = nil
                state.status = .idle
                return true
            }
            if cleared { recordError(nil) }
        }
    }

    /// Keeps the folder's error in the index (shown after a restart); a write that fails is
    /// reported. Runs on the node's queue.
    private func recordError(_ message: String?) {
        guard let host else { return }
        do { try host.index.setFolderError(id: id, message) } catch where error.kind != .notFound {
            // (Not found: the folder was unshared meanwhile; nothing to keep.)
            host.emitError(nil, "folder \(label): cannot record its state in the index: \(error.description)")
        } catch {}
    }

    func report(_ message: String) {
        host?.queue.async { [self] in host?.emitError(nil, "folder \(label): \(message)") }
    }

    static func nowNs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}
