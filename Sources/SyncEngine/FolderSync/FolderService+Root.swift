internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex

extension FolderService {
    /// `syncpeer confirm DIR`: the user says the folder is as they want it — its root (even
    /// a moved, re-created or emptied one) is adopted as it is now, and the deletions the
    /// next scan finds are recorded and sent even if they empty it. Then it syncs again.
    /// A mass change of the peers' that the folder holds is applied, the versions it
    /// replaces kept in the versions store.
    func confirmFolder(directory: String) throws(EngineError) -> FolderResult {
        let folder = try sharedFolder(at: directory)
        let result: Result<FolderResult, EngineError> = folder.io.sync { folder.confirm() }
        return try result.get()
    }

    /// `syncpeer verify DIR`: every file of the folder is read and hashed against the index
    /// (on this thread; the folder goes on syncing), the damaged ones rebuilt from a peer
    /// (on the folder's `io`), and the ones changed since the last scan rescanned.
    func verifyFolder(directory: String) throws(EngineError) -> VerifyResult {
        let folder = try sharedFolder(at: directory)
        let started = ContinuousClock.now
        let scrub = try folder.scrub()
        let (unrepaired, kept) = scrub.corrupt.isEmpty ? ([:], [:]) : folder.io.sync { folder.repair(scrub.corrupt) }
        if !scrub.changed.isEmpty { folder.io.async { folder.fullScanPaths(scrub.changed) } }
        folder.damaged.keep(only: Set(unrepaired.keys))
        let versions = self.versions?.scrub(folderID: folder.id) ?? (checked: 0, damaged: 0)
        let elapsed = ContinuousClock.now - started
        let damaged = scrub.corrupt.prefix(VerifyResult.listLimit).map {
            VerifyResult.Damaged(path: $0, repaired: unrepaired[PathKey($0)] == nil, reason: unrepaired[PathKey($0)], kept: kept[PathKey($0)])
        }
        return VerifyResult(folder: folder.id, path: folder.root, files: scrub.files, bytes: scrub.bytes,
                            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                            changed: scrub.changed.count, corrupt: scrub.corrupt.count,
                            repaired: scrub.corrupt.count - unrepaired.count, damaged: damaged,
                            versions: versions.checked, versionsDamaged: versions.damaged)
    }

    /// The shared folder whose root is `directory` (made absolute and standard).
    func sharedFolder(at directory: String) throws(EngineError) -> SharedFolder {
        let root = URL(fileURLWithPath: directory).standardizedFileURL.path
        let folder = sharedFolders().first { $0.root == root }
        guard let folder else { throw .notFound("\(directory) is not shared; see 'syncpeer status'") }
        return folder
    }

    /// `syncpeer rescan DIR [PATH]`: scans the folder now (or only PATH in it, relative to its
    /// root) instead of waiting for inotify or the periodic scan; answers once it is queued.
    func rescanFolder(directory: String, path sub: String?) throws(EngineError) -> FolderResult {
        let folder = try sharedFolder(at: directory)
        let root = folder.root
        guard let sub else {
            folder.io.async { folder.fullScan() }
            return FolderResult(folder: folder.id, path: folder.root)
        }
        let inside = URL(fileURLWithPath: root + "/" + sub).standardizedFileURL.path
        guard !sub.hasPrefix("/"), inside.hasPrefix(root + "/") else {
            throw .invalidArgument("'\(sub)' is not a path inside \(root): give it relative to the folder")
        }
        let relative = String(inside.dropFirst(root.count + 1))
        folder.io.async { folder.fullScanPaths([relative]) }
        return FolderResult(folder: folder.id, path: folder.root)
    }

    /// A folder just shared or accepted: its root gets the marker with the folder ID (a
    /// stale one of an earlier share is replaced) and its device and inode are recorded,
    /// before anything is scanned. On failure the new folder is removed again.
    func adoptRoot(of record: FolderRecord) throws(EngineError) {
        do {
            let identity = try FolderRoot.adopt(record.path, folderID: record.id)
            try index.setFolderRoot(id: record.id, device: identity.device, inode: identity.inode)
        } catch {
            var reason = "cannot make it a shared folder: \(error)"
            do { try index.removeFolder(id: record.id) } catch { reason += "; and cannot remove it from the index again: \(error)" }
            throw .io(path: record.path, reason: reason)
        }
    }
}
