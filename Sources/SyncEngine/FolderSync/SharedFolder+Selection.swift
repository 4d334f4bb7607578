#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// Selective sync (`syncpeer select`): the folder holds only the selected subtrees.
///
/// The selection rides on the ignore patterns (`IgnorePatterns.selection`), so what lies
/// outside is treated exactly as an ignored path: the planner never pulls it, the scanner
/// neither records it nor reports a record of it as deleted, and a block of it is not
/// served. Local files outside stay on disk and stay local (Syncthing's "ignored = not
/// synced"): a file only this node has is never removed because it was deselected.
///
/// Narrowing frees space: a deselected file goes from disk and its record from the index
/// only when a member's index holds the same version or a newer one (nothing is lost) and
/// the disk still holds what was recorded (no unscanned edit); a directory goes once it is
/// empty. The records are dropped, not turned into tombstones, so no peer is told of a
/// deletion (as `forgetVanished` does after a power cut). Widening scans and pulls: the
/// pull fetches what is now selected, with the usual folder states and file events.
extension SharedFolder {
    /// What a change of selection freed.
    struct Freed: Equatable {
        var files = 0
        var bytes: Int64 = 0
        /// Deselected files left on disk: no member holds their version, or they changed.
        var kept = 0
    }

    /// Whether this node holds a path (is a directory): for status, which counts nothing
    /// outside the selection as missing. Nil while the whole folder is held.
    var holds: ((String, Bool) -> Bool)? {
        guard let selection = servedIgnores.withLock({ $0?.selection }), !selection.isEverything else { return nil }
        return { selection.contains($0, isDirectory: $1) }
    }

    /// The selection stored in the index, or nil when it cannot be read (the one in force
    /// stays; an index that fails is said).
    func storedSelection() -> FolderSelection? {
        guard let index else { return nil }
        let paths: [String]
        do throws(IndexError) { paths = try index.selection(folderID: id) } catch {
            report("cannot read the selection from the index (the one in force stays): \(error)")
            return nil
        }
        return try? FolderSelection(paths)
    }

    /// Puts the stored selection in force (on io, after `setSelection` stored it): frees
    /// what was deselected, watches what is now in, then scans and pulls.
    func selectionChanged() -> Freed {
        dispatchPrecondition(condition: .onQueue(io))
        loadIgnores()
        let freed: Freed
        do { freed = try freeDeselected() } catch {
            report("cannot free what the selection leaves out (nothing more is removed): \(error)")
            freed = Freed()
        }
        // The watcher skipped directories outside the old selection: watch anew.
        dropWatcher()
        startWatcher(delay: watchDelay)
        io.async { [self] in
            fullScan()
            pull(paths: nil)
        }
        host?.folderChanged(id)
        return freed
    }

    /// Removes the deselected files a member holds and their records, a page of records at a
    /// time, and each deselected directory once its subtree is passed and empty. The subtree
    /// of "d" is exactly the paths between "d/" and "d0" in byte order ('0' follows '/'), so a
    /// directory is done once a path at or after "d0" comes: the open ones nest, at most one
    /// per component of a path, whatever the size of the folder.
    private func freeDeselected() throws -> Freed {
        guard let index, let handle = try? DirectoryHandle(path: root) else { return Freed() }
        let selection = ignores.selection
        let members = Set(try index.folderPeers(folderID: id).map(\.deviceID))
        var freed = Freed()
        var open: [String] = []
        var removed: [String] = []
        func close(before path: String?) {
            while let top = open.last, path.map({ !Array($0.utf8).lexicographicallyPrecedes(Array((top + "0").utf8)) }) ?? true {
                open.removeLast()
                if removeIfEmpty(top, under: handle) { removed.append(top) }
            }
        }
        var after: String?
        while true {
            let page = try index.files(folderID: id, afterPath: after, liveOnly: true, limit: Self.planPage, includeChunks: false)
            guard let last = page.last?.path else { break }
            after = last
            let outside = page.filter { !selection.contains($0.path, isDirectory: $0.kind == .directory) }
            let files = outside.filter { $0.kind != .directory }.map(\.path)
            let remotes = files.isEmpty ? [:] : try index.remoteFiles(folderID: id, paths: files, keyedBy: PathKey.init(_:))
            for record in outside {
                close(before: record.path)
                if record.kind == .directory {
                    open.append(record.path)
                    continue
                }
                let held = (remotes[PathKey(record.path)] ?? [:]).contains { device, remote in
                    guard members.contains(device), !remote.deleted else { return false }
                    let order = FileState(remote).version.compare(FileState(record).version)
                    return order == .equal || order == .greater
                }
                guard held, removeIfUnchanged(record, under: handle) else {
                    freed.kept += 1
                    continue
                }
                removed.append(record.path)
                freed.files += 1
                freed.bytes += record.kind == .file ? record.size : 0
            }
            if !removed.isEmpty { _ = try index.removeFiles(folderID: id, paths: removed) }
            removed = []
        }
        close(before: nil)
        if !removed.isEmpty { _ = try index.removeFiles(folderID: id, paths: removed) }
        if freed.files > 0 || freed.kept > 0 {
            let message = "selection changed: \(freed.files) file(s) removed here (\(freed.bytes) bytes; peers keep them)"
                + (freed.kept > 0 ? ", \(freed.kept) kept: no peer holds their version, or they changed" : "")
            host?.queue.async { [self] in host?.emitFolder(self, reason: message) }
        }
        return freed
    }

    /// Removes the directory at `path` if it is empty (or already gone).
    private func removeIfEmpty(_ path: String, under handle: DirectoryHandle) -> Bool {
        guard let resolved = try? SafePath(path).resolve(under: handle) else { return false }
        guard let kind = resolved.existing else { return true }
        return kind == .directory && unlinkat(resolved.directory.fd, resolved.name, AT_REMOVEDIR) == 0
    }

    /// Unlinks the file or symlink of `record` when the disk still holds what was recorded
    /// (kind, size, mtime, inode). A file already gone counts as removed.
    private func removeIfUnchanged(_ record: FileRecord, under handle: DirectoryHandle) -> Bool {
        guard let resolved = try? SafePath(record.path).resolve(under: handle) else { return false }
        guard resolved.existing != nil else { return true }
        var st = stat()
        guard fstatat(resolved.directory.fd, resolved.name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
        let isLink = (st.st_mode & S_IFMT) == S_IFLNK, isFile = (st.st_mode & S_IFMT) == S_IFREG
        guard record.kind == .symlink ? isLink : isFile else { return false }
        if record.kind == .file {
            let mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            guard Int64(st.st_size) == record.size, mtime == record.mtimeNs,
                  record.inode.map({ $0 == UInt64(st.st_ino) }) ?? true else { return false }
        }
        // Not synced to disk: a file a crash brings back lies outside the selection, ignored,
        // and its record is gone; widening finds it with the content peers hold (no conflict).
        // (An fsync of the directory per file made freeing 10,000 files take 48 s.)
        return unlinkat(resolved.directory.fd, resolved.name, 0) == 0
    }
}
