#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import PeerFiles
internal import PeerIndex

/// What the applier changes on disk besides assembling files — directories, conflict
/// copies, deletions, renames, metadata — each step checked, and the index records of it.
extension FolderApplier {
    // MARK: Directories and conflict copies

    /// A directory: made (or its mode set). Whatever else is in the way goes only if it is
    /// kept as the conflict copy, or if the index shows it is what peers have seen.
    func pullDirectory(_ state: FileEntry, _ resolved: ResolvedPath, conflictCopy: String?, root: DirectoryHandle) {
        let mode = mode_t(state.mode & 0o777)
        if resolved.existing == .directory {
            guard fchmodat(resolved.directory.fd, resolved.name, mode, 0) == 0 else {
                fail(state.path, "cannot change its permissions: \(Self.lastError())")
                return
            }
        } else {
            if resolved.existing != nil {
                if let copy = conflictCopy {
                    guard keepAsConflictCopy(resolved.directory, resolved.name, copy: copy, path: state.path) else { return }
                } else if local[PathKey(state.path)].map({ !$0.deleted }) != true {
                    rescan.append(state.path)   // not scanned yet: scan it first, never clobber it
                    return
                } else {
                    guard removeIndexedVersion(resolved, state.path, failure: "cannot remove what a folder replaces") else { return }
                }
            }
            guard mkdirat(resolved.directory.fd, resolved.name, mode) == 0 || errno == EEXIST else {
                fail(state.path, "cannot create the folder: \(Self.lastError())")
                return
            }
            madeDirectories = true
            // Where no `syncfs` will make the new name durable, its own directory's fsync does.
            if !syncfsIsBarrier { fsync(resolved.directory.fd) }
        }
        recordDirectory(state, resolved)
    }

    /// Notes the record of a directory made or updated at `resolved` (its inode and mtime read
    /// through the handle the pull resolved, not by resolving the path twice again): the
    /// records of a run of directories are written together (`storeDirectories`), one
    /// transaction and one commit for many, not one each (D: 5,000 directories were 5,000
    /// commits, each a WAL fdatasync). A directory has no chunks to read from the index.
    func recordDirectory(_ state: FileEntry, _ resolved: ResolvedPath) {
        var state = state
        var st = stat()
        var inode: UInt64?
        if fstatat(resolved.directory.fd, resolved.name, &st, AT_SYMLINK_NOFOLLOW) == 0 {
            inode = UInt64(st.st_ino)
            state.mtimeNs = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        }
        directoryRecords.append(FileRecord(folderID: folderID, state, inode: inode))
        if directoryRecords.count >= Self.recordSlice { storeDirectories() }
    }

    /// Writes the directory records noted so far (`recordDirectory`): before any action that
    /// is not a directory's pull (so they are in the index before anything placed inside
    /// them, or anything that reads them), at most `recordSlice` at once, and at the end.
    func storeDirectories() {
        guard !directoryRecords.isEmpty else { return }
        let records = directoryRecords
        directoryRecords = []
        store(records)
    }

    /// Moves the local `name` aside as the conflict copy `planned` (a path in the same
    /// directory), or under the first of its alternatives that is free when that name is
    /// taken (`freeConflictName`). False (and a failure of `path`) when that cannot be done:
    /// then the local version must stay where it is. A missing local entry has nothing to keep: true.
    func keepAsConflictCopy(_ directory: DirectoryHandle, _ name: String, copy planned: String, path: String) -> Bool {
        guard let copy = freeConflictName(directory, planned, of: path) else {
            fail(path, "its local version cannot be kept as \(planned) nor under \(ConflictName.maxAlternatives) other names: "
                 + "they exist; the local version stays")
            return false
        }
        let copyName = String(copy.split(separator: "/").last ?? Substring(copy))
        let outcome = directory.placeNew(name, as: copyName)
        guard outcome == .done || outcome == .failed(ENOENT) else {
            fail(path, "its local version cannot be kept as \(copy): \(Self.lastError()); the local version stays")
            return false
        }
        rescan.append(copy)
        if outcome == .done { host.emitFile(folder, path, .conflict, bytes: nil, total: nil, copy: copy, reason: nil) }
        return true
    }

    /// `planned`, or when that name is taken — an entry on disk, or a live entry in the index
    /// (a file not on disk now is still a version peers know by that name) — the first free
    /// of its alternatives (`ConflictName.alternative`: a function of the planned name, so
    /// nodes that see the same names choose alike; nodes that do not keep the version twice,
    /// never lose it). Nil when all are taken. At most 1 + `maxAlternatives` lookups.
    func freeConflictName(_ directory: DirectoryHandle, _ planned: String, of path: String) -> String? {
        for attempt in 0...ConflictName.maxAlternatives {
            guard let candidate = attempt == 0 ? planned : ConflictName.alternative(planned, of: path, attempt: attempt) else { return nil }
            guard directory.entryKind(String(candidate.split(separator: "/").last ?? Substring(candidate))) == nil else { continue }
            do {
                if let record = try index.file(folderID: folderID, path: candidate), !record.deleted { continue }
            } catch {
                continue   // unknown: taken, rather than risk replacing a version peers know
            }
            return candidate
        }
        return nil
    }

    // MARK: Delete, rename, record

    /// Deletes the local path as `state` (a tombstone that `device` sent) says, unless it
    /// changed here since it was scanned; a directory goes only once empty.
    func delete(_ state: FileEntry, from device: String, root: DirectoryHandle) {
        let resolved: ResolvedPath
        do {
            resolved = try SafePath(state.path).resolve(under: root)
        } catch let error as FileError where error.kind == .notFound || error.kind == .notADirectory {
            record(state, root: root)   // its parent is gone already: so is the path
            return
        } catch {
            fail(state.path, "cannot reach it to delete it: \(error)")
            return
        }
        switch resolved.existing {
        case nil:
            break
        case .directory:
            // Only an empty directory goes: anything still inside is kept (and synced), and
            // the directory with it if the deletion does not cover it.
            if unlinkat(resolved.directory.fd, resolved.name, AT_REMOVEDIR) != 0 {
                if errno == ENOTEMPTY || errno == EEXIST {
                    keepOrWait(state, resolved, deleter: device, root: root)
                } else {
                    fail(state.path, "cannot remove the folder: \(Self.lastError())")
                }
                return
            }
        default:
            guard removeIndexedVersion(resolved, state.path, failure: "cannot delete it") else { return }
        }
        // An unlink undone by a power cut under a recorded deletion would be scanned as a new
        // file. On a journalling file system the index's commit (an fsync) carries the unlink
        // with it; on FUSE (where `syncfs` is no barrier either) only this fsync does.
        if resolved.existing != nil, !syncfsIsBarrier { fsync(resolved.directory.fd) }
        record(state, root: root)
    }

    func rename(_ from: FileEntry, _ to: FileEntry, source: String, root: DirectoryHandle) {
        // The file moves as it is into the peer's version: its bytes must be what the index
        // records (hashed now), not only its size and mtime. Its chunks are read first: an
        // index that cannot give them fails the path before anything moves (recorded
        // without them, the file would stay listed with no chunks).
        let chunks: [FileChunkRecord]
        do { chunks = try index.file(folderID: folderID, path: from.path)?.chunks ?? [] } catch {
            return fail(to.path, "not moved: cannot read the index: \(error)")
        }
        guard let old = try? SafePath(from.path).resolve(under: root), old.existing == .file,
              diskMatchesIndex(from.path, root: root), contentMatchesIndex(from.path, root: root),
              let new = try? SafePath(to.path).resolve(under: root, createDirectories: true), new.existing == nil,
              (try? old.directory.move(old.name, to: new.directory, as: new.name)) != nil else {
            // Not as expected: fetch the new path normally, delete the old one if it matches
            // (an edit made here since is scanned instead, and wins over the deletion). The
            // resolve above may have made the new path's folders already.
            madeDirectories = true
            pull(to, from: source, root: root, conflictCopy: nil)
            delete(from, from: source, root: root)
            return
        }
        let flushed = syncfsIsBarrier ? syncFileSystem(root.fd) == 0
            : fsync(old.directory.fd) == 0 && fsync(new.directory.fd) == 0
        if !flushed { folder.report("cannot flush the rename of \(from.path) to disk: \(Self.lastError())") }
        store([FileRecord(folderID: folderID, from),
               FileRecord(folderID: folderID, to, inode: inode(new.directory, new.name), chunks: chunks)])
    }

    /// Records a state whose disk side is already right (metadata, directories, keepLocal).
    /// An index that cannot give a file's chunks fails the path (not recorded without them).
    func record(_ state: FileEntry, root: DirectoryHandle) {
        var chunks: [FileChunkRecord] = []
        var inode: UInt64?
        if !state.deleted, let resolved = try? SafePath(state.path).resolve(under: root) {
            inode = self.inode(resolved.directory, resolved.name)
            do { chunks = try index.file(folderID: folderID, path: state.path)?.chunks ?? [] } catch {
                return fail(state.path, "cannot read the index to record it: \(error)")
            }
        }
        var state = state
        if !state.deleted, let resolved = try? SafePath(state.path).resolve(under: root) {
            var st = stat()
            if fstatat(resolved.directory.fd, resolved.name, &st, AT_SYMLINK_NOFOLLOW) == 0 {
                state.mtimeNs = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            }
        }
        store([FileRecord(folderID: folderID, state, inode: inode, chunks: state.kind == .file ? chunks : [])])
    }

    /// Writes records to the index; a failure is a failure of each of their paths (the
    /// disk changed, the index did not: the next scan sees the change as local).
    func store(_ records: [FileRecord]) {
        takeIn(records, failure: core.upsert(records))
    }

    /// Takes in what came of `upsert` (on `io`): the records are marked as placed, or each of
    /// their paths fails.
    func takeIn(_ records: [FileRecord], failure: String?) {
        if let failure {
            for record in records { fail(record.path, failure) }
        } else if !records.isEmpty {
            folder.notePlaced(records)
            for record in records where record.kind == .file && !record.deleted {
                host.emitFile(folder, record.path, .pulled, bytes: record.size, total: nil, copy: nil, reason: nil)
            }
        }
    }

    /// True when the file at `path` holds the chunks the index records for it, each hashed
    /// now (on all cores); false for anything else, a file written meanwhile included.
    func contentMatchesIndex(_ path: String, root: DirectoryHandle) -> Bool {
        guard let record = indexRecord(path), record.kind == .file, !record.deleted else { return false }
        return SharedFolder.check(record, under: root) == .intact
    }

    /// What the index records for `path` (nil when nothing, or when it cannot be read:
    /// every caller then leaves the disk as it is and rescans the path, which says why).
    func indexRecord(_ path: String) -> FileRecord? {
        (try? index.file(folderID: folderID, path: path)) ?? nil
    }

    /// True when what is on disk is what the index last recorded: the same kind, and for a
    /// file the same size and mtime, for a link the same target (a link's own mtime and
    /// size are not what a peer sent). False when the index cannot be read.
    func diskMatchesIndex(_ path: String, root: DirectoryHandle) -> Bool {
        let found: FileRecord?
        do { found = try index.file(folderID: folderID, path: path) } catch { return false }
        guard let record = found else { return true }
        let resolved: ResolvedPath
        do {
            resolved = try SafePath(path).resolve(under: root)
        } catch let error as FileError where error.kind == .notFound || error.kind == .notADirectory {
            return record.deleted   // a parent is gone: nothing is at the path
        } catch {
            return false
        }
        guard resolved.existing != nil else { return record.deleted }
        return !record.deleted && entry(resolved.name, in: resolved.directory, is: record)
    }

    /// True when `directory` is still the folder's directory at `path`'s parent: that path,
    /// resolved again from the root now, reaches the same directory (device and inode).
    /// False when the user moved or deleted it (or a parent) since it was opened: an entry
    /// put in through the old handle would land wherever the directory went — out of the
    /// folder, or under another path — while the index recorded it at `path`; the scan of
    /// the move would turn that record into a deletion that dominates the peer's version, and
    /// the version would be lost on every node (a candidate for make chaos seed 1004's lost
    /// concurrent edit, found by reading the code; not reproduced).
    func directoryInPlace(_ directory: DirectoryHandle, of path: String) -> Bool {
        var held = stat(), now = stat()
        guard fstat(directory.fd, &held) == 0 else { return false }
        if !path.contains("/") {
            // A file at the root: what is at the folder's path now, by `stat` (it follows a
            // link as opening the root does), not an open of the root for each file.
            guard stat(folder.root, &now) == 0 else { return false }
        } else {
            guard let root = try? DirectoryHandle(path: folder.root), let resolved = try? SafePath(path).resolve(under: root),
                  fstat(resolved.directory.fd, &now) == 0 else { return false }
        }
        return held.st_dev == now.st_dev && held.st_ino == now.st_ino
    }

    /// `directoryInPlace` of a batch's directories, each checked once (`place` keeps one set
    /// for before the batch's renames and one for after them); keyed by the handle and the
    /// parent path it was opened for.
    struct DirectoryChecks {
        private struct Key: Hashable {
            let handle: ObjectIdentifier
            let parent: String
        }
        private var known: [Key: Bool] = [:]

        mutating func check(_ directory: DirectoryHandle, of path: String, _ applier: FolderApplier) -> Bool {
            let key = Key(handle: ObjectIdentifier(directory), parent: path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "")
            if let result = known[key] { return result }
            let result = applier.directoryInPlace(directory, of: path)
            known[key] = result
            return result
        }
    }

    /// The target of the link `name` (nil if it is not a readable link).
    func linkTarget(_ directory: DirectoryHandle, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = buffer.withUnsafeMutableBytes { readlinkat(directory.fd, name, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    func inode(_ directory: DirectoryHandle, _ name: String) -> UInt64? {
        var st = stat()
        guard fstatat(directory.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return UInt64(st.st_ino)
    }

    /// Sets the mtime of `name` (a link itself, never its target); false on failure (errno set).
    func setTimes(_ directory: DirectoryHandle, _ name: String, _ mtimeNs: Int64) -> Bool {
        var times = [timespec(tv_sec: 0, tv_nsec: Self.utimeOmit),
                     timespec(tv_sec: Int(mtimeNs / 1_000_000_000), tv_nsec: Int(mtimeNs % 1_000_000_000))]
        return utimensat(directory.fd, name, &times, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// `UTIME_OMIT` (not imported): leave that time as it is.
    static var utimeOmit: Int { (1 << 30) - 2 }

    static func lastError() -> String { String(cString: strerror(errno)) }
}
