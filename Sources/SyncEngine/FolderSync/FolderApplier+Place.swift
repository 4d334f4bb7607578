#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex

/// Putting a pulled entry in place, and taking a deleted one away, without a window in which
/// a user's write could be replaced (`DirectoryHandle.placeNew`, `replace`, `remove`): the
/// chaos test lost a version on a loaded machine, with the applier's thread paused between a
/// check of the path and the rename over it.
extension FolderApplier {
    /// Puts `temp` in place of the version `expected` that the index records at `name`. The
    /// version that comes out is left at `temp` and listed in `outgoing`: the batch keeps it
    /// once no file of the batch can be taken back (`place`), and removes it once the new
    /// versions are recorded (a large file takes a while to remove).
    func placeOver(_ temp: String, at name: String, in directory: DirectoryHandle, path: String,
                   expected: FileRecord) -> PlaceOutcome {
        let outcome = directory.replace(name, with: temp, removingOutgoing: false) { entry($0, in: directory, is: expected) }
        if outcome == .done { outgoing.append((directory, temp, expected)) }
        guard case .stranded(let hidden) = outcome else { return outcome }
        keepAside(hidden, of: path, in: directory)   // the pulled version is in place
        return .done
    }

    /// Removes the file or link at `resolved` if it is the version the index records for
    /// `path`. One edited since stays and is scanned (the edit wins, and is synced); a
    /// failure is a failing path (`failure` says what could not be done). True when gone.
    func removeIndexedVersion(_ resolved: ResolvedPath, _ path: String, failure: String) -> Bool {
        guard let expected = indexRecord(path), !expected.deleted,
              entry(resolved.name, in: resolved.directory, is: expected) else {
            rescan.append(path)
            return false
        }
        // Kept before it is unlinked: once removed, its content is gone from this node (issue 41).
        switch removeIfUnchanged(resolved.name, in: resolved.directory, path: path, expected: expected, keeping: "peer-delete") {
        case .done:
            return true
        case .changedHere, .stranded:
            rescan.append(path)
        case .failed(let code):
            fail(path, "\(failure): \(String(cString: strerror(code)))")
        }
        return false
    }

    /// Removes the entry `name` if it is the version `expected` that the index records; with
    /// `reason`, keeps it first, once checked: at its hidden aside name, where nothing puts it
    /// back into the folder, a large file's inode itself may be kept (a pack, nothing copied).
    func removeIfUnchanged(_ name: String, in directory: DirectoryHandle, path: String, expected: FileRecord,
                           keeping reason: String? = nil) -> PlaceOutcome {
        let outcome = directory.remove(name, via: Self.asideName(forPath: path)) { found in
            guard entry(found, in: directory, is: expected) else { return false }
            if let reason { keepVersion(expected, name: found, in: directory, reason: reason, swappedOut: found != name) }
            return true
        }
        guard case .stranded(let hidden) = outcome else { return outcome }
        keepAside(hidden, of: path, in: directory)
        return .changedHere
    }

    /// True when the entry `name` is the version `record` describes: same kind, for a file
    /// the same size and mtime, for a link the same target (what the scanner compares: a
    /// record's inode is not refreshed when a scan finds the same content under a new one,
    /// so comparing it would refuse the entry for ever, and the folder would never converge).
    func entry(_ name: String, in directory: DirectoryHandle, is record: FileRecord) -> Bool {
        var st = stat()
        guard fstatat(directory.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
        switch record.kind {
        case .directory:
            return (st.st_mode & S_IFMT) == S_IFDIR
        case .symlink:
            return (st.st_mode & S_IFMT) == S_IFLNK && linkTarget(directory, name) == record.symlinkTarget
        case .file:
            let mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            return (st.st_mode & S_IFMT) == S_IFREG && Int64(st.st_size) == record.size && mtime == record.mtimeNs
        }
    }

    /// Keeps the file `expected` describes, at `name` in `directory`, in the versions store
    /// (chunks the store lacks are read from it and verified).
    func keepVersion(_ expected: FileRecord, name: String, in directory: DirectoryHandle, reason: String, swappedOut: Bool = false) {
        guard let versions = host.versions, expected.kind == .file, !keptBefore.contains(PathKey(expected.path)) else { return }
        var record = expected
        if record.chunks.isEmpty, record.size > 0 {
            // Without its chunks it would be listed as kept with no content: said instead.
            do { record.chunks = try index.file(folderID: folderID, path: expected.path)?.chunks ?? [] } catch {
                return folder.report("cannot keep the replaced version of \(expected.path): cannot read the index: \(error)")
            }
        }
        // Swapped out of the folder, the inode itself may be kept (a pack: nothing copied).
        if swappedOut { versions.keep(record, swappedOut: name, in: directory, reason: reason); return }
        versions.keep(record, from: try? ChunkReader(name: name, in: directory), reason: reason)
    }

    /// A user's version found under one of our hidden names that cannot go back to its own:
    /// it gets a visible name beside it ("name (1)"), is scanned and synced, and the user is told.
    private func keepAside(_ hidden: String, of path: String, in directory: DirectoryHandle) {
        let name = String(path.split(separator: "/").last ?? Substring(path))
        let kept = directory.uniqueName(for: name)
        let keptPath = (path.split(separator: "/").dropLast() + [Substring(kept)]).joined(separator: "/")
        if directory.placeNew(hidden, as: kept) == .done {
            rescan.append(keptPath)
            folder.report("\(path) changed here while a peer's change was applied: the local version is kept as \(keptPath)")
        } else {
            fail(path, "changed here while a peer's change was applied; the local version is in \(hidden) and cannot be renamed: \(Self.lastError())")
        }
    }

    /// Where a deletion moves an entry to check it: a hidden temporary name (ignored by the
    /// scanner and the watcher, removed at start if a killed daemon left it), other than the
    /// pull's temporary name of any path (a NUL, which no path holds, is hashed first).
    static func asideName(forPath path: String) -> String {
        "." + NameTag.hex(of: [0] + Array(path.utf8), digits: 32) + IgnorePatterns.temporarySuffix
    }
}
