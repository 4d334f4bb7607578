#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import PeerFiles
internal import PeerIndex

/// After the machine went down under the daemon (`RunningMarker`): a path the index records
/// but the disk lacks may have vanished with the power (its name or data never reached the
/// disk, the daemon's own pull or the user's save alike). A scanner that trusts the disk
/// would send that as a deletion to every peer, and a peer that held the only other copy
/// would delete it too (power-loss tests, seed 1: every file saved without fsync in the last
/// moments before a cut was deleted at the peer). So the first full scan after such a start
/// records no deletion: it drops the vanished paths' records, and the pull that follows the
/// scan fetches them again from a peer that has them. What no peer has is gone here (as it
/// is on disk) and nobody is told to delete it. A deletion made by the user while the machine
/// was down is undone by this (the file comes back): the safe side of the two.
extension SharedFolder {
    /// Drops the index records of `paths` (vanished in a power cut); says so once.
    func forgetVanished(_ paths: [String], index: NodeIndex) throws {
        guard !paths.isEmpty else { return }
        var dropped = 0
        for start in stride(from: 0, to: paths.count, by: Self.deletionBatch) {
            dropped += try index.removeFiles(folderID: id, paths: Array(paths[start..<min(paths.count, start + Self.deletionBatch)]))
        }
        report("\(dropped) file(s) and folder(s) vanished from \(root) when the machine went down: "
            + "they are fetched again from peers, not deleted at them")
    }
}

extension SharedFolder {
    /// Of what the first full scan after the machine went down found added or changed, the
    /// files a power cut rolled back: on disk an older or torn version (mtime not newer than
    /// the record's, other content) of a version a peer holds (or has built on), or a file
    /// whose recorded deletion a peer holds (or has built on) come back. Recorded as they are, they would go to every peer
    /// as a new version (an older version, an empty file, a deleted file back: power-loss
    /// tests, seed 1, a user's edit undone by the cut was sent back as the newest). Instead
    /// the file on disk goes: a deletion stays recorded (and is done again), a version's
    /// record is dropped and the pull after the scan fetches it again. Returns their paths,
    /// which the scan leaves out of its changes. Where no peer holds the recorded version,
    /// what the disk holds is the newest left anywhere and is recorded as usual.
    ///
    /// What goes is not discarded when its bytes are no version known here (not the
    /// recorded one, not one a peer holds at that path): an older version, a torn one, or a
    /// deleted file come back may hold the only copy of something the user wants, so it is
    /// kept in the versions store first (reason `rolled-back`, written by this device, with
    /// its size and modification time and no version vector: no peer knows these bytes), where
    /// `history` lists it and `restore` brings it back. An empty file holds nothing and simply
    /// goes, as does everything in a folder whose policy is `none`.
    func takeRolledBack(_ found: [PeerFiles.ScannedEntry], index: NodeIndex) throws -> Set<PathKey> {
        let files = found.filter { $0.kind == .file }
        guard !files.isEmpty else { return [] }
        let paths = files.map(\.path)
        let olds = try index.files(folderID: id, paths: paths, keyedBy: PathKey.init(_:))
        let remotes = try index.remoteFiles(folderID: id, paths: paths, keyedBy: PathKey.init(_:))
        var rolledBack: [(path: String, deleted: Bool)] = []
        for entry in files {
            guard let old = olds[PathKey(entry.path)], old.kind == .file, entry.mtimeNs <= old.mtimeNs else { continue }
            if !old.deleted, UInt64(clamping: old.size) == entry.size, old.rootHash == entry.manifest?.rootHash { continue }
            // A peer holds the recorded state, or one built on it (its user edited on since):
            // either way the disk's bytes are older than what peers have. (Only the same
            // state counted: a file rolled back while its peer had edited on was recorded as
            // an edit here, concurrent with the peer's, and became a conflict copy: long
            // mode, folder pull, seed 2001.)
            let recorded = old.version
            let held = (remotes[PathKey(entry.path)] ?? [:]).values.contains { remote in
                let order = remote.version.compare(recorded)
                return order == .greater || (order == .equal && remote.deleted == old.deleted)
            }
            if held { rolledBack.append((entry.path, old.deleted)) }
        }
        guard !rolledBack.isEmpty, let handle = try? DirectoryHandle(path: root) else { return [] }
        let scanned = Dictionary(files.map { (PathKey($0.path), $0) }, uniquingKeysWith: { first, _ in first })
        var taken = Set<PathKey>()
        var kept = 0
        for (path, _) in rolledBack {
            guard let resolved = try? SafePath(path).resolve(under: handle), resolved.existing == .file else { continue }
            if let keeper = host?.versions, keeper.keeps(folderID: id), let entry = scanned[PathKey(path)], entry.size > 0,
               !Self.isKnown(entry, recorded: olds[PathKey(path)], remotes: remotes[PathKey(path)] ?? [:]) {
                let record = FileRecord(folderID: id, FileEntry(path: path, kind: .file, size: entry.size, mtimeNs: entry.mtimeNs,
                                        mode: entry.mode, version: [:], modifiedBy: host?.localDevice ?? ""))
                if keeper.keepFile(at: root + "/" + path, as: record, reason: "rolled-back", whole: true) != nil {
                    kept += 1
                } else {
                    report("\(path) held an older version after the machine went down and cannot be kept: it is replaced")
                }
            }
            guard unlinkat(resolved.directory.fd, resolved.name, 0) == 0 else { continue }
            fsync(resolved.directory.fd)
            taken.insert(PathKey(path))
        }
        let versions = rolledBack.filter { !$0.deleted && taken.contains(PathKey($0.path)) }.map(\.path)
        if !versions.isEmpty { _ = try index.removeFiles(folderID: id, paths: versions) }
        if !taken.isEmpty {
            report("\(taken.count) file(s) in \(root) held an older version after the machine went down: "
                + "the version peers hold is fetched again, the older one is not sent to them"
                + (kept > 0 ? " (\(kept) kept in the versions store as they were: 'syncpeer history \(root)')" : ""))
        }
        return taken
    }

    /// Whether the bytes scanned at a path are a version known here: the recorded one or
    /// one a peer holds there (by content hash).
    static func isKnown(_ entry: PeerFiles.ScannedEntry, recorded: FileRecord?, remotes: [String: RemoteFileRecord]) -> Bool {
        guard let hash = entry.manifest?.rootHash else { return false }
        if let recorded, !recorded.deleted, recorded.rootHash == hash { return true }
        return remotes.values.contains { !$0.deleted && $0.rootHash == hash }
    }
}

extension SharedFolder {
    /// Of what the first full scan after the machine went down found added or changed, the
    /// files this node's pulls placed (durably) whose records the cut undid: each holds
    /// exactly a peer's state (content, size, mtime and mode), newer than what is recorded.
    /// Recorded as edits made here, they were concurrent with the peer's next edit and
    /// became conflict copies of versions nobody edited here (long mode, folder pull, seed
    /// 2006); they are recorded as the peer's state instead (path → record, chunks and inode
    /// left to the caller).
    func placedBeforeTheCut(_ found: [FileEntry], olds: [PathKey: FileRecord], index: NodeIndex) throws -> [PathKey: FileRecord] {
        let files = found.filter { $0.kind == .file }
        guard !files.isEmpty else { return [:] }
        let remotes = try index.remoteFiles(folderID: id, paths: files.map(\.path), keyedBy: PathKey.init(_:))
        var placed: [PathKey: FileRecord] = [:]
        for entry in files {
            let key = PathKey(entry.path)
            let recorded = olds[key]?.version ?? VersionVector()
            let match = (remotes[key] ?? [:]).values.first { remote in
                !remote.deleted && remote.kind == .file && remote.size == entry.size && remote.mtimeNs == entry.mtimeNs
                    && remote.mode & 0o777 == entry.mode & 0o777 && remote.rootHash != nil && remote.rootHash == entry.rootHash
                    && remote.version.compare(recorded) == .greater
            }
            guard let match else { continue }
            placed[key] = FileRecord(folderID: id, FileEntry(path: entry.path, kind: .file, size: entry.size, mtimeNs: entry.mtimeNs,
                                     mode: entry.mode, version: match.version, rootHash: match.rootHash, modifiedBy: match.modifiedBy))
        }
        return placed
    }
}
