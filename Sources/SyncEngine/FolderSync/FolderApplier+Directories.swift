#if canImport(Glibc)
internal import Glibc
#endif
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex

/// Directories that a deletion lost to what they hold (`DirectoryDeletion`): kept, or made
/// again, and recorded live so that every node ends with them.
extension FolderApplier {
    /// A directory a peer deleted (`tombstone`, sent by `deleter`) that is not empty here:
    /// kept and recorded live again when something inside survives the deletion; otherwise
    /// what it holds waits for its own tombstones, and the directory is a failing path (shown
    /// by `status`, tried again) until it can go.
    func keepOrWait(_ tombstone: FileState, _ resolved: ResolvedPath, deleter: String, root: DirectoryHandle) {
        let children: [String]
        let locals: [PathKey: FileRecord]
        let remotes: [PathKey: [String: RemoteFileRecord]]
        var st = stat()
        do {
            let directory = try resolved.directory.openSubdirectory(resolved.name)
            children = try directory.entryNames().filter { !Self.isTempName($0) }.map { tombstone.path + "/" + $0 }
            locals = try index.files(folderID: folderID, paths: children, keyedBy: PathKey.init(_:))
            remotes = try index.remoteFiles(folderID: folderID, paths: children, keyedBy: PathKey.init(_:))
            guard fstat(directory.fd, &st) == 0 else { throw FileError(kind: .io, operation: "stat", path: tombstone.path, message: Self.lastError()) }
        } catch {
            fail(tombstone.path, "cannot look inside the folder a peer deleted: \(error)")
            return
        }
        let own: FileState?
        do { own = try index.file(folderID: folderID, path: tombstone.path).map(FileState.init) } catch {
            return fail(tombstone.path, "cannot read the index: \(error)")
        }
        let decision = DirectoryDeletion.decide(
            local: own?.deleted == false ? own : nil, tombstone: tombstone,
            children: children.map { DirectoryDeletion.Child(local: locals[PathKey($0)].map(FileState.init),
                                                             deleter: remotes[PathKey($0)]?[deleter].map(FileState.init)) },
            device: host.localDevice,
            mtimeNs: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec), mode: UInt32(st.st_mode & 0o7777))
        switch decision {
        case let .keep(state):
            record(state, root: root)
        case .wait:
            failed(tombstone.path, PullFailure(.notEmpty, "a peer deleted this folder, and what it still holds here is not deleted yet"))
        }
    }

    /// The parents of `path` that a pull just made again although the index records them as
    /// deleted: they are scanned once the apply is done, so they are recorded live again
    /// (with a change of ours on top of the deletion) and come back on every node.
    func rescanRecreatedParents(of path: String) {
        var parent = Substring(path)
        while let slash = parent.lastIndex(of: "/") {
            parent = parent[..<slash]
            // (An index that cannot say: the parent is scanned anyway; a scan changes nothing that is right.)
            do {
                guard let record = try index.file(folderID: folderID, path: String(parent)) else { continue }
                if record.deleted { rescan.append(String(parent)) }
            } catch { rescan.append(String(parent)) }
        }
    }
}
