#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import Dispatch
internal import Synchronization
internal import PeerFiles
internal import PeerIndex

/// A pull's batches on their way to the disk (on the folder's `io`): sealed (`flusher` closes
/// and flushes them), placed (renamed into place, each rename checked), then made durable and
/// recorded on `recorder`, a batch renamed only once the one before it is recorded.
extension FolderApplier {
    /// Ends the batch being prepared: its remaining fetches start, and once they have all
    /// ended, `flusher` closes and flushes its temporaries while `io` prepares the next batch
    /// (before, `io` sat idle through the batch's last round trips and its data barrier). The
    /// batch sealed before it is placed first, so at most two batches are open at once.
    func seal(root: DirectoryHandle) {
        parents.clear()
        guard !pending.isEmpty else { return }
        launch()
        place(root: root)
        let batch = Flushing(pending, perFile: Self.syncsPerFile(items: pending.count, madeDirectories: madeDirectories,
                                                                 syncfsIsBarrier: syncfsIsBarrier))
        let fetches = inFlight
        inFlight = DispatchGroup()
        pending = []
        pendingBytes = 0
        descriptors = BatchDescriptors()
        batch.done.enter()
        flusher.async {
            fetches.wait()
            batch.flush(root: root)
            batch.done.leave()
        }
        flushing = batch
    }

    /// Waits until the sealed batch is flushed, then puts its files in place (on `io`), with
    /// one barrier for the renames before they are recorded.
    func place(root: DirectoryHandle) {
        takeStored()
        guard let batch = flushing else { return }
        flushing = nil
        batch.done.wait()
        recording.wait()
        let outcome = batch.outcome
        for (path, failure) in outcome.failures { failed(path, failure) }
        let ready = outcome.ready
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
        PlacementSeam.afterRenames(root: folder.root, done.map(\.item.state.path))
        // Moved away between the check and a rename: what we put there is taken back (the
        // peer still has it; the path is planned again once the move is scanned).
        done.removeAll { placed in
            guard !stillInPlace.check(placed.item.directory, of: placed.item.state.path, self) else { return false }
            takeBack(placed.item, inode: placed.inode)
            return true
        }
        // The versions that came out are final now (none goes back into the folder): kept
        // before the batch removes them (issue 41), a large one as its own inode (a pack).
        for old in outgoing { keepVersion(old.expected, name: old.name, in: old.directory, reason: "peer-edit", swappedOut: true) }
        // The barrier for the renames, then the records: on `recorder`, while `io` goes on
        // (`settle` waits for it before anything reads what the batch recorded).
        // Only records and names go along: the batch's descriptors close here.
        let records = done.map { FileRecord(folderID: folderID, $0.item.state, inode: $0.inode, chunks: $0.item.chunks) }
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
        recorder.async { [core] in
            defer { recorded.leave() }
            if !records.isEmpty {
                var failure: String?
                for directory in renamedIn ?? [root] {
                    let result = renamedIn == nil ? syncFileSystem(directory.fd) : fsync(directory.fd)
                    if result != 0 { failure = failure ?? Self.lastError() }
                }
                if let failure { core.folder.report("cannot flush the renames of \(records.count) file(s) to disk: \(failure)") }
            }
            var failure: String?
            for first in stride(from: 0, to: records.count, by: Self.recordSlice) {
                let slice = Array(records[first..<min(records.count, first + Self.recordSlice)])
                // After a failed slice the rest fail the same way, without a busy timeout each.
                failure = failure ?? core.upsert(slice)
                core.stored.withLock { $0.append((slice, failure)) }
            }
            for old in replaced { unlinkat(old.directory.fd, old.name, 0) }
            core.folder.activity.end(paths: paths)
            core.folder.heldDone(paths: paths, placed: records.map(\.path))
        }
    }

    /// Takes a placed file back out of a directory that was moved while the batch was placed
    /// (`place`). Only what is still exactly ours goes (same inode, size and mtime: a user's
    /// edit since stays); a version it replaced (left at the temporary name for `outgoing`)
    /// is swapped back to its name, never kept as a replaced version nor removed with the
    /// batch's outgoing ones (it is the user's file again).
    func takeBack(_ item: Pending, inode placedInode: UInt64?) {
        defer { rescan.append(item.state.path) }
        let replaced = outgoing.firstIndex { $0.directory === item.directory && $0.name == item.temp }
        if let replaced { outgoing.remove(at: replaced) }
        let record = FileRecord(folderID: folderID, item.state, inode: placedInode, chunks: item.chunks)
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
    func settle(root: DirectoryHandle) {
        parents.clear()
        place(root: root)
        recorder.sync {}
        takeStored()
    }

    /// Takes in what `recorder` recorded so far (on `io`; also from `place`, so the records
    /// of a long pull do not pile up until its end).
    func takeStored() {
        let results: [(records: [FileRecord], failure: String?)] = core.stored.withLock { all in
            defer { all = [] }
            return all
        }
        for (records, failure) in results { takeIn(records, failure: failure) }
    }

    /// Drops an assembled file that cannot be put in place: its temporary goes, the path
    /// keeps what it had, and the failure is reported.
    func discard(_ item: Pending, _ reason: String) {
        unlinkat(item.directory.fd, item.temp, 0)
        fail(item.state.path, reason)
    }
}
