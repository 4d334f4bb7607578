internal import Dispatch
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// A shared folder's guard against its root vanishing or being replaced, and against a
/// scan that would empty it: what runs on `io` before every scan and pull, and after a
/// scan before its deletions are recorded.
///
///     scan/pull ─▶ checkRoot ─(refused)─▶ stop(.root): error in status, watcher off, nothing sent
///                     │ trusted / adopted
///                     ▼
///     scan: additions and changes recorded per batch, deletions held
///                     ▼
///     recordDeletions ─▶ MassDeletionGuard on the whole scan ─(refused)─▶ stop(.deletions)
///                     ▼
///     tombstones recorded and sent; a stopped folder resumes
///
/// A stopped folder resumes by itself when a later whole scan passes both checks: the timer
/// checks the root every `rootPollInterval`, and a watcher event while stopped by a refused
/// deletion triggers a whole scan. `syncpeer confirm DIR` adopts the root as it is and lets
/// the next scan record whatever it deletes.
extension SharedFolder {
    /// Why a folder stopped.
    enum StopReason: Equatable {
        /// Its root is not the adopted directory (missing, replaced, marker gone).
        case root
        /// A scan's deletions would have emptied it.
        case deletions
    }

    /// How often the timer looks at the root (at most; the rescan interval when shorter).
    static let rootPollInterval = 5.0
    /// Deletions looked up and recorded this many at a time.
    static let deletionBatch = 500

    /// The timer: a whole rescan when one is due (or the root is back), else a look at the root.
    func tick() {
        dispatchPrecondition(condition: .onQueue(io))
        let now = Self.nowNs()
        state.withLock { $0.massGuard.expire(nowNs: now) }
        let (lastFullScan, rescanSeconds, stopped) = state.withLock { ($0.lastFullScan, $0.rescanSeconds, $0.stopped) }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - lastFullScan.uptimeNanoseconds) / 1e9
        if stopped == .root || elapsed >= rescanSeconds {
            if stopped == .root && !checkRoot() { return }
            fullScan()
            pull(paths: nil)
        } else if stopped == nil {
            checkRoot()
        }
    }

    /// The watcher lost the root (deleted, moved, unmounted): stop, unless the path already
    /// names the adopted root again.
    func rootGone() {
        dispatchPrecondition(condition: .onQueue(io))
        dropWatcher()
        if checkRoot() {
            startWatcher(delay: watchDelay)
            fullScan()
        }
    }

    /// Whether the root is the adopted directory (adopting it first if the folder has no
    /// recorded identity yet and the root is plausible). If not, the folder stops with why.
    @discardableResult
    func checkRoot() -> Bool {
        dispatchPrecondition(condition: .onQueue(io))
        guard let index else { return false }
        do {
            let cached = state.withLock { (identity: $0.rootIdentity, loaded: $0.rootIdentityLoaded) }
            var rootIdentity = cached.identity
            if !cached.loaded {
                rootIdentity = try index.folder(id: id)?.rootIdentity
                state.withLock { [rootIdentity] state in
                    state.rootIdentity = rootIdentity
                    state.rootIdentityLoaded = true
                }
            }
            let observation: RootObservation
            switch FolderRoot.observe(root) {
            case .failure(let problem):
                stop(.root, rootMessage(problem))
                return false
            case .success(let found):
                observation = found
            }
            let live = rootIdentity == nil ? try index.liveTotals(folderID: id).entries : 0
            switch FolderRoot.judge(observation, folderID: id, expected: rootIdentity, liveEntries: live) {
            case .trusted:
                return true
            case .adopt:
                let identity = observation.marker == .folder(id) ? observation.identity : try FolderRoot.adopt(root, folderID: id)
                try index.setFolderRoot(id: id, device: identity.device, inode: identity.inode)
                state.withLock { $0.rootIdentity = identity }
                return true
            case .refused(let problem):
                stop(.root, rootMessage(problem))
                return false
            }
        } catch {
            stop(.root, "cannot check the folder root \(root): \(error); syncing stopped so that nothing is deleted on other devices")
            return false
        }
    }

    private func rootMessage(_ problem: RootProblem) -> String {
        "\(problem.description); syncing stopped so that nothing is deleted here or on other devices, and resumes when "
            + "the folder is back. If you moved or replaced it on purpose, run 'syncpeer confirm \(root)'"
    }

    /// Stops syncing with `message` as the folder's error (emitted once per distinct message).
    func stop(_ reason: StopReason, _ message: String) {
        dispatchPrecondition(condition: .onQueue(io))
        let shown = state.withLock { state in
            state.stopped = reason
            defer { state.shownStop = message }
            return state.shownStop == message
        }
        if reason == .root { dropWatcher() }
        guard !shown else { return }
        setError(message)
    }

    /// A whole scan passed the checks: a stopped folder syncs again, starting with what
    /// the peers changed while it was stopped (their updates were stored, not pulled).
    func resumeIfStopped() {
        dispatchPrecondition(condition: .onQueue(io))
        let wasStopped = state.withLock { state in
            defer { (state.stopped, state.shownStop) = (nil, nil) }
            return state.stopped != nil
        }
        guard wasStopped else { return }
        clearError()
        startWatcher(delay: watchDelay)
        io.async { [self] in pull(paths: nil) }
    }

    /// Records the deletions a scan found, once the scan is over: the mass-deletion guard
    /// judges the whole scan, and the root is checked again just before. Throws the
    /// guard's refusal (nothing recorded). Returns whether anything was written.
    func recordDeletions(_ paths: [String], before: LiveTotals, index: NodeIndex) throws -> Bool {
        dispatchPrecondition(condition: .onQueue(io))
        guard !paths.isEmpty, let host else { return false }
        let afterAdditions = try index.liveTotals(folderID: id)
        var deletedFiles = 0
        for start in stride(from: 0, to: paths.count, by: Self.deletionBatch) {
            let chunk = paths[start..<min(paths.count, start + Self.deletionBatch)]
            deletedFiles += try index.files(folderID: id, paths: chunk, keyedBy: PathKey.init(_:)).values.count { $0.kind == .file && !$0.deleted }
        }
        let totals = ScanTotals(entriesBefore: before.entries, filesBefore: before.files,
                                entriesAfterAdditions: afterAdditions.entries, filesAfterAdditions: afterAdditions.files,
                                deletedEntries: paths.count, deletedFiles: deletedFiles)
        if let refusal = MassDeletionGuard.check(totals, allowDeletingEverything: deletionsConfirmed) { throw refusal }
        guard checkRoot() else { throw ScanError.rootMissing(path: root, reason: "it changed before the deletions were recorded") }
        let changes = LocalChanges(localDevice: host.localDevice)
        let now = Self.nowNs()
        var wrote = false
        for start in stride(from: 0, to: paths.count, by: Self.deletionBatch) {
            let chunk = paths[start..<min(paths.count, start + Self.deletionBatch)]
            let old = try index.files(folderID: id, paths: chunk, keyedBy: PathKey.init(_:))
            let rows = chunk.compactMap { path in
                old[PathKey(path)].flatMap { changes.tombstone(for: FileState($0), deletedAtNs: now) }?.fileRecord(folderID: id)
            }
            guard !rows.isEmpty else { continue }
            // What was deleted here is gone from the disk: recorded as a version, held if
            // the store has its chunks, else known here for a peer that holds it (issue 41).
            host.versions?.noteLost(rows.compactMap { old[PathKey($0.path)] }, reason: "local-delete")
            _ = try index.upsertFiles(rows)
            wrote = true
            host.folderChanged(id)
        }
        return wrote
    }

    /// `syncpeer confirm`: adopts the root as it is now (writes its marker, records its
    /// identity) and lets the next scan record every deletion it finds, even all files;
    /// then scans and syncs. The root must exist.
    func confirm() -> Result<FolderResult, EngineError> {
        dispatchPrecondition(condition: .onQueue(io))
        guard let index else { return .failure(.io(path: root, reason: "the node is stopping")) }
        let identity: RootIdentity
        do {
            identity = try FolderRoot.adopt(root, folderID: id)
        } catch {
            return .failure(.io(path: root, reason: "cannot adopt it: \(error.description)"))
        }
        do {
            try index.setFolderRoot(id: id, device: identity.device, inode: identity.inode)
        } catch {
            return .failure(.index(error))
        }
        let was = state.withLock { state in
            state.rootIdentity = identity
            state.rootIdentityLoaded = true
            state.deletionsConfirmed = true
            return state.shownStop
        }
        confirmMassChange()
        io.async { [self] in
            fullScan()
            pull(paths: nil)
        }
        return .success(FolderResult(folder: id, path: root, stoppedBecause: was))
    }
}
