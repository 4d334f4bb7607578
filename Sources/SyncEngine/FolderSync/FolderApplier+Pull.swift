#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import Dispatch
internal import PeerFiles
internal import PeerIndex

/// A file's or a link's pull (on the folder's `io`): its temporary assembled from the blocks
/// that came with the index and from local files, and what is still missing fetched from
/// peers, many chunks at once across the batch (`launch`).
extension FolderApplier {
    func pull(_ state: FileEntry, from device: String, root: DirectoryHandle, conflictCopy: String?) {
        guard let safe = try? SafePath(state.path) else { return }
        if local[PathKey(state.path)] != nil, conflictCopy == nil, !diskMatchesIndex(state.path, root: root) {
            rescan.append(state.path)  // changed here since the last scan: scan it first
            return
        }
        // A parent missing here (deleted, while a peer kept or made this entry in it) is made again.
        // (What is at the name matters to a directory's pull only: a file's or a link's goes to its temporary.)
        let found = try? parents.resolve(safe, under: root, lookingUp: state.kind == .directory)
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
        if state.kind == .directory { return pullDirectory(state, resolved, conflictCopy: conflictCopy, root: root) }
        let temp = Self.tempName(forPath: state.path)
        switch state.kind {
        case .directory:
            break
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
            guard let manifest = manifest(of: state.path, from: device), manifest.rootHash == (state.rootHash ?? []) else {
                failed(state.path, PullFailure(.badData, "its peer sent no valid manifest for it"))
                return
            }
            // A temp file kept from a failed attempt at this version is reused (its chunks
            // that verify are not fetched again); any other one is emptied.
            let reuse = keptTemps[PathKey(state.path)].map { $0 == PullFailure.version(of: state) } ?? false
            // Chunks fetched ahead while a member hashed the file (`Prefetches`) come with their temp file.
            let ahead = folder.prefetch.claim(path: state.path, manifest: manifest, into: resolved.directory, temp: temp) ?? []
            // Made with the mode it will have (owner read and write at least, so that a kept one
            // can be opened again): `flush` then sets it only where the umask took some away.
            let fd = openat(resolved.directory.fd, temp, O_RDWR | O_CREAT | (reuse || !ahead.isEmpty ? 0 : O_TRUNC) | O_NOFOLLOW | O_CLOEXEC,
                            mode_t(state.mode & 0o777) | 0o600)
            guard fd >= 0 else {
                failed(state.path, .writing(errno, "cannot create its temporary file \(temp)"))
                return
            }
            if !ahead.isEmpty { fchmod(fd, mode_t(state.mode & 0o777) | 0o600) }
            let (missing, failure) = copyLocalChunks(manifest, of: state.path, into: fd, reusingTemp: reuse, held: ahead)
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
            if base != nil { descriptors.addFile() }
            // Its members may fetch what we hold of it from us meanwhile (fan-out).
            folder.held.fetching(path: state.path, root: manifest.rootHash, chunks: manifest.chunks, missing: missing,
                                 directory: resolved.directory, temp: temp, ownChange: state.modifiedBy == host.localDevice)
            // (Ranked among the peers that do not hold it yet: those that may fetch it with us.)
            for chunk in HeldChunks.spread(missing, device: host.localDevice, among: connected.subtracting(sources)) {
                jobs.append(FetchJob(pending: pending.count - 1, chunk: chunk, path: state.path, sources: sources,
                                     base: DeltaBase.worthIt(chunk) ? base : nil))
            }
            pendingBytes += Int64(manifest.fileSize)
            if jobs.count >= Self.launchJobs { launch() }
        }
    }

    /// Adds an assembled file to the batch, counting the descriptors it holds open.
    func add(_ item: Pending, root: DirectoryHandle) {
        pending.append(item)
        descriptors.add(fd: item.fd, directory: item.directory, root: root)
    }

    /// Peers that are connected and have exactly this content for the path.
    func devices(holding state: FileEntry) -> [String] {
        holders(of: state, in: remotes[PathKey(state.path)] ?? [:])
    }

    /// Connected peers whose entry (device → state) has exactly this content.
    func holders(of state: FileEntry, in entries: [String: FileEntry]) -> [String] {
        entries.filter { !$0.value.deleted && $0.value.rootHash == state.rootHash && connected.contains($0.key) }.map(\.key).sorted()
    }

    /// Sizes the file and writes every chunk that came with the index (`blocks`) or that some
    /// local file already holds (or, with `reusingTemp`, that the temp file holds already and
    /// that verifies); returns the
    /// chunks still missing, or why the file cannot be written. Chunks of files that are
    /// still what the index recorded are copied in the kernel, unread (`LocalSource`).
    func copyLocalChunks(_ manifest: Manifest, of path: String, into fd: Int32, reusingTemp: Bool,
                         held: Set<UInt64> = []) -> (missing: [ChunkRef], failure: PullFailure?) {
        // A new temp file of one chunk gets its size from that chunk's write (B: 10,000 calls).
        if reusingTemp || !held.isEmpty || manifest.chunks.count > 1, ftruncate(fd, off_t(manifest.fileSize)) != 0 {
            return ([], .writing(errno, "cannot size its temporary file"))
        }
        let sources = LocalSources()
        var runs: [CopyRun] = []
        var missing: [ChunkRef] = []
        for chunk in manifest.chunks {
            if held.contains(chunk.offset) { continue }   // fetched ahead (counted as received then)
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
    func indexBlock(_ chunk: ChunkRef) -> IndexBlock? {
        if let block = blocks[chunk.hash], block.bytes.count == Int(chunk.size) {
            usedBlocks.append(chunk.hash)
            return block
        }
        guard chunk.size <= UInt32(SharedFolder.indexBlockLimit) else { return nil }
        return folder.takeWaitingBlock(chunk.hash, size: Int(chunk.size))
    }

    /// Lets the blocks written so far go, and their share of the node's budget.
    func dropUsedBlocks() {
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
        var fresh: [PathKey: [String: FileEntry]] = [:]
        let time = ContinuousClock.now
        if lastRefresh.map({ time - $0 >= Self.refreshInterval }) ?? true {
            lastRefresh = time
            connected = host.connectedDevices()
            // (An index that cannot say: the planned sources serve; nothing else.)
            fresh = ((try? index.remoteFiles(folderID: folderID, paths: jobs.map(\.path).pathKeys.map(\.string), keyedBy: PathKey.init(_:))) ?? [:])
                .mapValues { $0.mapValues(\.entry) }
        }
        let units = units
        let group = inFlight
        let diskFull = core.diskFull
        let (folder, host) = (folder, host)
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
            var sources = now.isEmpty ? job.sources : now
            // Members still fetching the file that hold this chunk (fan-out, `HeldChunks`).
            for device in folder.held.holders(path: job.path, root: item.state.rootHash ?? [], offset: job.chunk.offset, among: connected)
            where !sources.contains(device) { sources.append(device) }
            launched += 1
            let want = core.want(job.chunk, path: job.path, sources: sources, attempt: launched, base: job.base) {
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
                if error == 0, let note = folder.held.verified(path: job.path, offset: job.chunk.offset) { host.announceHeld(folder, note) }
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
}
