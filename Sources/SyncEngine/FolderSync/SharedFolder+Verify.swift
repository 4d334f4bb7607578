#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import PeerFiles
internal import Synchronization
internal import PeerIndex

/// `syncpeer verify` (a scrub): every live file of the index is read and each of its chunks
/// hashed against what the index recorded. A scan trusts a file whose size, mtime and inode
/// are unchanged; bytes that rot under such a stamp are found only here. A file that does not
/// match is rebuilt from its verified chunks and the rest fetched from a peer that has the
/// same version (a pull of our own version, through `FolderApplier`: every byte placed is
/// verified); without such a peer it is reported, and left as it is.
///
/// The reading runs on the caller's thread, a page of records at a time (the folder keeps
/// syncing meanwhile); the repair, like any pull, on the folder's `io`.
extension SharedFolder {
    /// Records read from the index at a time.
    static let verifyPage = 500

    /// What a scrub found.
    struct Scrub {
        var files = 0
        var bytes: Int64 = 0
        /// Files whose bytes do not match their recorded chunks (stamp unchanged).
        var corrupt: [String] = []
        /// Files changed on disk since the last scan (another stamp): not damage, so they are
        /// rescanned rather than repaired.
        var changed: [String] = []
        /// Corrupt files that could not be repaired, with why.
        var unrepaired: [String: String] = [:]
    }

    /// Reads and hashes every live file the index records for this folder. Throws when the
    /// index cannot be read or the folder is not usable (a stopped folder is not scrubbed).
    func scrub() throws(EngineError) -> Scrub {
        let ready: (NodeIndex, IgnorePatterns)? = io.sync {
            guard stopped == nil, let index, checkRoot(), let ignores = servedIgnores.withLock({ $0 }) else { return nil }
            return (index, ignores)
        }
        guard let (index, ignores) = ready else {
            throw .io(path: root, reason: "the folder is stopped (see 'syncpeer status'); verify it once it syncs again")
        }
        let handle: DirectoryHandle
        do { handle = try DirectoryHandle(path: root) } catch { throw .io(path: root, reason: error.description) }
        var scrub = Scrub()
        var after: String?
        while true {
            let page: [FileRecord]
            do {
                page = try index.files(folderID: id, afterPath: after, liveOnly: true, limit: Self.verifyPage)
            } catch {
                throw .io(path: root, reason: "cannot read the index: \(error)")
            }
            guard let last = page.last?.path else { break }
            after = last
            for record in page where record.kind == .file && !ignores.isIgnored(record.path, isDirectory: false) {
                switch Self.check(record, under: handle) {
                case .intact:
                    scrub.files += 1
                    scrub.bytes += record.size
                case .corrupt:
                    scrub.files += 1
                    scrub.bytes += record.size
                    scrub.corrupt.append(record.path)
                case .changed:
                    scrub.changed.append(record.path)
                }
            }
        }
        return scrub
    }

    enum FileCheck { case intact, corrupt, changed }

    /// Whether the file at `record.path` still holds the recorded chunks (hashed on all
    /// cores): read with the stamp checked before and after, so a file written meanwhile is
    /// `changed`, not corrupt.
    static func check(_ record: FileRecord, under root: DirectoryHandle) -> FileCheck {
        guard let resolved = try? SafePath(record.path).resolve(under: root), resolved.existing == .file else { return .changed }
        let fd = openat(resolved.directory.fd, resolved.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return .changed }
        defer { close(fd) }
        guard let stamp = FolderApplier.FileStamp(fd), stamp.size == record.size, stamp.mtimeNs == record.mtimeNs,
              record.inode == nil || record.inode == stamp.inode else { return .changed }
        var checks: [ChunkReader.Check] = []
        var covered: Int64 = 0
        var intact = true
        for chunk in record.chunks {
            guard chunk.offset == covered, let hash = ChunkHash(bytes: chunk.hash), let size = UInt32(exactly: chunk.size) else {
                intact = false
                break
            }
            checks.append(ChunkReader.Check(fd: fd, offset: UInt64(chunk.offset), size: size, hash: hash))
            covered += chunk.size
        }
        if intact && (covered != record.size || !ChunkReader.mismatches(checks).isEmpty) { intact = false }
        guard FolderApplier.FileStamp(fd) == stamp else { return .changed }
        return intact ? .intact : .corrupt
    }

    /// Rebuilds `paths` (files found corrupt) as the version the index records, from their
    /// verified chunks and a peer that has that version; the paths that could not be, with
    /// why (keyed by their bytes: two names equal under Unicode normalization stay two), and
    /// the ID each replaced file was kept as. A file is replaced only once it is kept in the
    /// versions store (an edit in place that kept the size and mtime looks like damage: it is
    /// never lost), and counts as repaired only once it verifies after the repair. On `io`.
    func repair(_ paths: [String]) -> (unrepaired: [PathKey: String], kept: [PathKey: String]) {
        dispatchPrecondition(condition: .onQueue(io))
        func all(_ why: String) -> [PathKey: String] { Dictionary(paths.map { (PathKey($0), why) }) { a, _ in a } }
        guard stopped == nil, let index, let host, checkRoot() else { return (all("the folder is stopped (see 'syncpeer status')"), [:]) }
        let local: [PathKey: FileState]
        let entries: [PathKey: [String: RemoteFileRecord]]
        let members: [FolderPeerRecord]
        do {
            local = try index.files(folderID: id, paths: paths, includeChunks: false, keyedBy: PathKey.init(_:)).mapValues(FileState.init)
            entries = try index.remoteFiles(folderID: id, paths: paths, keyedBy: PathKey.init(_:))
            members = try index.folderPeers(folderID: id)
        } catch {
            return (all("cannot read the index: \(error)"), [:])
        }
        let (remotes, manifests) = Self.peerStates(entries.flatMap { $0.value.map { ($0.key, $0.value) } },
                                                   members: Set(members.map(\.deviceID)))
        let connected = host.connectedDevices()
        var unrepaired: [PathKey: String] = [:]
        var kept: [PathKey: String] = [:]
        var actions: [SyncAction] = []
        for key in paths.map(PathKey.init(_:)) {
            guard let state = local[key], !state.deleted else {
                unrepaired[key] = "it changed since it was verified"
                continue
            }
            let holders = (remotes[key] ?? [:]).filter { !$0.value.deleted && $0.value.rootHash == state.rootHash }.keys.sorted()
            guard let device = holders.first(where: connected.contains) else {
                unrepaired[key] = holders.isEmpty ? "no peer has this version of it" : "no peer that has this version of it is connected"
                continue
            }
            // Kept in the versions store as it was found (`history`, `restore`).
            let found: FileRecord?
            do { found = try index.file(folderID: id, path: key.string) } catch {
                unrepaired[key] = "not replaced: cannot read the index: \(error)"
                continue
            }
            guard let versions = host.versions, let record = found,
                  let version = versions.keepFile(at: root + "/" + key.string, as: record, reason: "verify") else {
                unrepaired[key] = "cannot keep it in the versions store before it is replaced (see 'syncpeer versions \(root)')"
                continue
            }
            kept[key] = String(host.localDevice.prefix(7)) + "-" + String(version)
            actions.append(.pull(state, from: device))
        }
        guard !actions.isEmpty else { return (unrepaired, kept) }
        setStatus(.syncing)
        let applier = FolderApplier(folder: self, host: host, index: index, local: local, remotes: remotes,
                                    manifests: manifests, blocks: [:])
        applier.keptTemps = keptTemps
        applier.apply(actions)
        recordOutcome(applier.failures, actions: actions)
        setStatus(.idle)
        announcePulled()
        for (key, failed) in applier.failures { unrepaired[key] = failed.failure.reason }
        // Repaired only if it holds the recorded chunks now (a file changed meanwhile is
        // rescanned by the pull, not replaced).
        let handle = try? DirectoryHandle(path: root)
        for case let .pull(state, _) in actions where unrepaired[PathKey(state.path)] == nil {
            let record: FileRecord?
            do { record = try index.file(folderID: id, path: state.path) } catch {
                unrepaired[PathKey(state.path)] = "cannot read the index to check the repair: \(error)"
                continue
            }
            if let handle, let record, Self.check(record, under: handle) == .intact { continue }
            unrepaired[PathKey(state.path)] = "it changed since it was verified: it is rescanned as an edit"
        }
        return (unrepaired, kept)
    }
}
