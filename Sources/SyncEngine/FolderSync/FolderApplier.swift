#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import Foundation
internal import PeerFiles
internal import PeerIndex

/// Applies a folder's planned actions to the disk and the index (on the folder's `io`).
///
/// Files are assembled in temporary files next to their final place (`.name.syncpeer-tmp`,
/// which scanners and watchers ignore), chunk by chunk: first from any local file that
/// holds a chunk with the same hash (renames and copies move no data), then from connected
/// peers that have the content, several chunks and several peers at once. Every chunk is
/// verified. A batch of files then gets one durability barrier (`syncfs`) before the
/// renames and one after, so many small files cost two barriers, not one fsync each, and a
/// crash leaves every file either old or new.
final class FolderApplier: @unchecked Sendable {
    // @unchecked: used on the folder's `io` queue; the block-fetch callbacks that run
    // elsewhere only call `write(_:at:_:)` (pwrite on a descriptor) and `fetch` (which
    // touches immutable state).
    let folder: SharedFolder
    let node: Node
    let index: NodeIndex
    let local: [String: FileState]
    /// Path → device → that peer's state (what the plan was made from).
    let remotes: [String: [String: FileState]]
    let manifests: [String: [String: [UInt8]]]
    /// Peers connected at the start of the apply, refreshed before each batch's fetches.
    private var connected: Set<String> = []
    /// Chunk hash → where local files hold it (looked up for every `batchFiles` actions).
    private var localLocations: [[UInt8]: [ChunkLocation]] = [:]
    let folderID: String
    /// Files assembled and waiting for the batch barrier.
    private var pending: [Pending] = []
    private var pendingBytes: Int64 = 0
    private var rescan: [String] = []
    static let batchFiles = 256
    static let batchBytes: Int64 = 64 << 20
    static let inFlightUnit = 64 << 10
    static let inFlightUnits = 256   // 16 MiB

    struct Pending {
        let directory: DirectoryHandle
        let temp: String
        let name: String
        let state: FileState
        let chunks: [FileChunkRecord]
        /// A local file that must become the conflict copy first.
        var conflictCopy: String?
        /// The open temporary file (-1 for links); closed at commit.
        var fd: Int32 = -1
        /// Set when a chunk could not be fetched: the file is dropped at commit.
        let failure = FailureFlag()
    }

    /// A chunk to fetch from peers for a pending file; fetched for the whole batch at once.
    struct FetchJob {
        let pending: Int
        let chunk: ChunkRef
        let path: String
        let sources: [String]
    }
    private var jobs: [FetchJob] = []

    init(folder: SharedFolder, node: Node, index: NodeIndex, local: [String: FileState],
         remotes: [String: [String: FileState]], manifests: [String: [String: [UInt8]]]) {
        self.folder = folder
        self.node = node
        self.index = index
        self.local = local
        self.remotes = remotes
        self.manifests = manifests
        folderID = folder.id
    }

    func apply(_ actions: [SyncAction]) {
        guard let root = try? DirectoryHandle(path: folder.root) else { return }
        connected = node.connectedDevices()
        // Directories first (parents before children), deletions last (children first).
        let creates = actions.filter { if case let .pull(s, _) = $0 { return s.kind == .directory && !s.deleted } else { return false } }
            .sorted { $0.paths[0] < $1.paths[0] }
        let deletes = actions.filter { if case .delete = $0 { return true } else { return false } }
            .sorted { $0.paths[0].count > $1.paths[0].count }
        let others = actions.filter { action in
            !creates.contains(action) && !deletes.contains(action)
        }
        let ordered = creates + others + deletes
        for (n, action) in ordered.enumerated() {
            if n % Self.batchFiles == 0 { lookUpLocalChunks(ordered[n..<min(n + Self.batchFiles, ordered.count)]) }
            perform(action, root: root)
            if pending.count >= Self.batchFiles || pendingBytes >= Self.batchBytes { commit(root: root) }
        }
        commit(root: root)
        if !rescan.isEmpty {
            // Conflict copies and skipped paths are picked up as local changes.
            let paths = rescan
            rescan = []
            folder.io.async { [folder] in folder.fullScanPaths(paths) }
        }
    }

    /// Where local files hold the chunks the next actions need: one lookup for every
    /// `batchFiles` actions (so files committed by earlier batches count too).
    private func lookUpLocalChunks(_ actions: ArraySlice<SyncAction>) {
        var hashes: [[UInt8]] = []
        for action in actions {
            let wanted: (FileState, String)? = switch action {
            case let .pull(state, device), let .conflict(state, device, _, _), let .rename(_, state, device): (state, device)
            default: nil
            }
            guard let (state, device) = wanted, state.kind == .file, !state.deleted,
                  let bytes = manifests[state.path]?[device], let manifest = try? Manifest.decode(bytes) else { continue }
            hashes += manifest.chunks.map(\.hash.bytes)
        }
        localLocations = hashes.isEmpty ? [:] : (try? index.localChunkLocations(hashes: hashes)) ?? [:]
    }

    private func perform(_ action: SyncAction, root: DirectoryHandle) {
        switch action {
        case .upToDate:
            return
        case let .pull(state, from):
            pull(state, from: from, root: root, conflictCopy: nil)
        case let .updateMetadata(state, _):
            guard let resolved = try? SafePath(state.path).resolve(under: root), resolved.existing != nil,
                  diskMatchesIndex(state.path, root: root) else { rescan.append(state.path); return }
            if state.kind != .symlink { fchmodat(resolved.directory.fd, resolved.name, mode_t(state.mode & 0o777), 0) }
            setTimes(resolved.directory, resolved.name, state.mtimeNs)
            record(state, root: root)
        case let .delete(state, _):
            delete(state, root: root)
        case .keepLocal:
            // Our version wins: nothing changes here, and our record keeps its own version.
            // (Recording the merged version would make it dominate the loser's, and the loser
            // would then overwrite its edit instead of keeping it as a conflict copy.)
            return
        case let .conflict(winner, from, loser, copyName):
            let localState = local[winner.path]
            if let localState, !localState.deleted, localState.version == loser.version {
                // Our copy lost: it is kept under the conflict name, the winner takes its place
                // (recorded with the merged version, which then settles every device).
                pull(winner, from: from, root: root, conflictCopy: copyName)
            } else if let localState, !localState.deleted, localState.hasSameContent(as: winner) {
                // Ours is the winner: the losing device makes the copy; keep our version as is.
                return
            } else if winner.deleted {
                delete(winner, root: root)
            } else {
                pull(winner, from: from, root: root, conflictCopy: nil)
            }
        case let .rename(from, to, source):
            rename(from, to, source: source, root: root)
        }
    }

    // MARK: Pull

    private func pull(_ state: FileState, from device: String, root: DirectoryHandle, conflictCopy: String?) {
        guard let safe = try? SafePath(state.path) else { return }
        if local[state.path] != nil, conflictCopy == nil, !diskMatchesIndex(state.path, root: root) {
            rescan.append(state.path)  // changed here since the last scan: scan it first
            return
        }
        guard let resolved = try? safe.resolve(under: root, createDirectories: true) else {
            folder.report("cannot create the folder of \(state.path)")
            return
        }
        switch state.kind {
        case .directory:
            if resolved.existing == nil { mkdirat(resolved.directory.fd, resolved.name, mode_t(state.mode & 0o777)) }
            else if resolved.existing == .directory { fchmodat(resolved.directory.fd, resolved.name, mode_t(state.mode & 0o777), 0) }
            else { rescan.append(state.path); return }
            record(state, root: root)
        case .symlink:
            let temp = Self.tempName(resolved.name)
            unlinkat(resolved.directory.fd, temp, 0)
            guard symlinkat(state.symlinkTarget ?? "", resolved.directory.fd, temp) == 0 else {
                folder.report("cannot create the link \(state.path)")
                return
            }
            pending.append(Pending(directory: resolved.directory, temp: temp, name: resolved.name, state: state, chunks: [],
                                   conflictCopy: conflictCopy))
        case .file:
            guard let bytes = manifests[state.path]?[device], let manifest = try? Manifest.decode(bytes),
                  manifest.rootHash == (state.rootHash ?? []) else {
                folder.report("no valid manifest for \(state.path) from its peer")
                return
            }
            let temp = Self.tempName(resolved.name)
            let fd = openat(resolved.directory.fd, temp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                folder.report("cannot write \(state.path): \(String(cString: strerror(errno)))")
                return
            }
            guard let missing = copyLocalChunks(manifest, into: fd, path: state.path) else {
                close(fd)
                unlinkat(resolved.directory.fd, temp, 0)
                return
            }
            let sources = missing.isEmpty ? [] : devices(holding: state)
            if !missing.isEmpty && sources.isEmpty {
                folder.report("no connected peer has \(state.path) right now; it will be fetched when one is")
                close(fd)
                unlinkat(resolved.directory.fd, temp, 0)
                return
            }
            if !missing.isEmpty {
                folder.activity.begin(path: state.path, size: Int64(manifest.fileSize),
                                      needed: missing.reduce(Int64(0)) { $0 + Int64($1.size) }, peers: sources)
            }
            let chunks = manifest.chunks.map { FileChunkRecord(offset: Int64($0.offset), size: Int64($0.size), hash: $0.hash.bytes) }
            var item = Pending(directory: resolved.directory, temp: temp, name: resolved.name, state: state, chunks: chunks,
                               conflictCopy: conflictCopy)
            item.fd = fd
            pending.append(item)
            for chunk in missing {
                jobs.append(FetchJob(pending: pending.count - 1, chunk: chunk, path: state.path, sources: sources))
            }
            pendingBytes += Int64(manifest.fileSize)
        }
    }

    /// Peers that are connected and have exactly this content for the path.
    private func devices(holding state: FileState) -> [String] {
        holders(of: state, in: remotes[state.path] ?? [:])
    }

    /// Connected peers whose entry (device → state) has exactly this content.
    private func holders(of state: FileState, in entries: [String: FileState]) -> [String] {
        entries.filter { !$0.value.deleted && $0.value.rootHash == state.rootHash && connected.contains($0.key) }.map(\.key).sorted()
    }

    /// Sizes the file and writes every chunk some local file already holds; returns the
    /// chunks still missing (nil when the file cannot be written).
    private func copyLocalChunks(_ manifest: Manifest, into fd: Int32, path: String) -> [ChunkRef]? {
        if manifest.fileSize > 0, ftruncate(fd, off_t(manifest.fileSize)) != 0 {
            folder.report("cannot write \(path): \(String(cString: strerror(errno)))")
            return nil
        }
        var missing: [ChunkRef] = []
        for chunk in manifest.chunks {
            if let bytes = localChunk(chunk) {
                guard write(bytes, at: chunk.offset, fd) else { return nil }
                folder.activity.reused(bytes: bytes.count)
            } else {
                missing.append(chunk)
            }
        }
        return missing
    }

    /// Fetches every queued chunk of the batch from peers, many at a time across all files
    /// (many small files do not wait for each other), spread over the peers that hold each
    /// file.
    private func fetchAll() {
        guard !jobs.isEmpty else { return }
        // Peers may have connected (or gone) and sent their index since the plan: every
        // connected peer that holds a file's content now serves its blocks (multi-source).
        connected = node.connectedDevices()
        let fresh = ((try? index.remoteFiles(folderID: folderID, paths: Set(jobs.map(\.path)))) ?? [:])
            .mapValues { $0.mapValues(FileState.init) }
        // In flight: at most `inFlightUnits` units of `inFlightUnit` bytes (a small file's
        // block takes one unit, a 4 MiB chunk 64), so many small files keep the link busy
        // and big chunks stay within the memory budget. Only this loop takes units.
        let units = DispatchSemaphore(value: Self.inFlightUnits)
        let group = DispatchGroup()
        for (n, job) in jobs.enumerated() {
            let item = pending[job.pending]
            if item.failure.isSet { continue }
            let weight = min(Self.inFlightUnits, max(1, (Int(job.chunk.size) + Self.inFlightUnit - 1) / Self.inFlightUnit))
            for _ in 0..<weight { units.wait() }
            group.enter()
            let fd = item.fd
            let now = holders(of: item.state, in: fresh[job.path] ?? [:])
            fetch(job.chunk, path: job.path, sources: now.isEmpty ? job.sources : now, attempt: n) { (bytes: [UInt8]?) in
                defer {
                    for _ in 0..<weight { units.signal() }
                    group.leave()
                }
                guard let bytes, self.write(bytes, at: job.chunk.offset, fd) else {
                    item.failure.set()
                    return
                }
            }
        }
        group.wait()
        jobs = []
    }

    /// Asks the peers in turn (starting at a different one per chunk) until one answers
    /// with bytes that match the hash.
    private func fetch(_ chunk: ChunkRef, path: String, sources: [String], attempt: Int, tries: Int = 0,
                       completion: @escaping @Sendable ([UInt8]?) -> Void) {
        guard tries < sources.count else { completion(nil); return }
        let device = sources[(attempt + tries) % sources.count]
        node.requestBlock(device: device, folder: folderID, path: path, offset: chunk.offset, size: chunk.size,
                          hash: chunk.hash.bytes) { [self] bytes in
            if let bytes, ChunkHash.of(bytes) == chunk.hash {
                folder.activity.fetched(path: path, from: device, bytes: bytes.count)
                completion(bytes)
            } else {
                fetch(chunk, path: path, sources: sources, attempt: attempt, tries: tries + 1, completion: completion)
            }
        }
    }

    /// A chunk with this hash from any local file that still holds it.
    private func localChunk(_ chunk: ChunkRef) -> [UInt8]? {
        for location in localLocations[chunk.hash.bytes] ?? [] where location.size == Int64(chunk.size) {
            let rootPath = location.folderID == folderID ? folder.root : (try? index.folder(id: location.folderID))??.path
            guard let rootPath, let handle = try? DirectoryHandle(path: rootPath),
                  let resolved = try? SafePath(location.path).resolve(under: handle), resolved.existing == .file,
                  let reader = try? ChunkReader(name: resolved.name, in: resolved.directory) else { continue }
            let ref = ChunkRef(offset: UInt64(location.offset), size: chunk.size, hash: chunk.hash)
            if let bytes = try? reader.bytes(of: ref, verify: true) { return bytes }
        }
        return nil
    }

    private func write(_ bytes: [UInt8], at offset: UInt64, _ fd: Int32) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(offset) + off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                folder.report(errno == ENOSPC ? "disk full: free some space; syncing resumes at the next scan" : "write failed: \(String(cString: strerror(errno)))")
                return false
            }
            done += n
        }
        return true
    }

    // MARK: Commit

    /// One barrier for the data of the whole batch, the renames, one barrier for the renames.
    private func commit(root: DirectoryHandle) {
        guard !pending.isEmpty else { return }
        fetchAll()
        var ready: [Pending] = []
        for item in pending {
            guard item.fd >= 0 else { ready.append(item); continue }
            if item.failure.isSet {
                close(item.fd)
                unlinkat(item.directory.fd, item.temp, 0)
                folder.report("could not fetch every chunk of \(item.state.path) from its peers; it will be retried")
                continue
            }
            // Mode and mtime last: writing would change the mtime again.
            fchmod(item.fd, mode_t(item.state.mode & 0o777))
            var times = [timespec(tv_sec: 0, tv_nsec: utimeOmit),
                         timespec(tv_sec: Int(item.state.mtimeNs / 1_000_000_000), tv_nsec: Int(item.state.mtimeNs % 1_000_000_000))]
            futimens(item.fd, &times)
            close(item.fd)
            ready.append(item)
        }
        _ = syncFileSystem(root.fd)
        var done: [Pending] = []
        for item in ready {
            if let copy = item.conflictCopy {
                let copyName = String(copy.split(separator: "/").last ?? Substring(copy))
                if item.directory.entryKind(copyName) == nil {
                    renameat(item.directory.fd, item.name, item.directory.fd, copyName)
                    rescan.append(copy)
                }
            } else if local[item.state.path] == nil, item.directory.entryKind(item.name) != nil {
                // Something appeared here since the plan: keep it, and scan it.
                unlinkat(item.directory.fd, item.temp, 0)
                rescan.append(item.state.path)
                continue
            } else if local[item.state.path] != nil, !diskMatchesIndex(item.state.path, root: root) {
                // Edited here while the content was fetched (checked at the plan, seconds ago):
                // the edit is not replaced; it is scanned, and then a conflict keeps both.
                unlinkat(item.directory.fd, item.temp, 0)
                rescan.append(item.state.path)
                continue
            }
            guard renameat(item.directory.fd, item.temp, item.directory.fd, item.name) == 0 else {
                folder.report("cannot put \(item.state.path) in place: \(String(cString: strerror(errno)))")
                unlinkat(item.directory.fd, item.temp, 0)
                continue
            }
            done.append(item)
        }
        _ = syncFileSystem(root.fd)
        let records = done.map { item in
            item.state.fileRecord(folderID: folderID, inode: inode(item.directory, item.name), chunks: item.chunks)
        }
        if !records.isEmpty { _ = try? index.upsertFiles(records) }
        folder.activity.endAll()
        pending = []
        pendingBytes = 0
    }

    // MARK: Delete, rename, record

    private func delete(_ state: FileState, root: DirectoryHandle) {
        guard let resolved = try? SafePath(state.path).resolve(under: root) else { return }
        switch resolved.existing {
        case nil:
            break
        case .directory:
            // Only an empty directory goes: anything still inside is kept (and synced).
            if unlinkat(resolved.directory.fd, resolved.name, AT_REMOVEDIR) != 0 {
                rescan.append(state.path)
                return
            }
        default:
            guard diskMatchesIndex(state.path, root: root) else {
                rescan.append(state.path)  // edited here since: the edit wins, it is scanned and synced
                return
            }
            unlinkat(resolved.directory.fd, resolved.name, 0)
        }
        record(state, root: root)
    }

    private func rename(_ from: FileState, _ to: FileState, source: String, root: DirectoryHandle) {
        guard let old = try? SafePath(from.path).resolve(under: root), old.existing == .file,
              diskMatchesIndex(from.path, root: root),
              let new = try? SafePath(to.path).resolve(under: root, createDirectories: true), new.existing == nil,
              renameat(old.directory.fd, old.name, new.directory.fd, new.name) == 0 else {
            // Not as expected: fetch the new path normally, delete the old one if it matches.
            pull(to, from: source, root: root, conflictCopy: nil)
            delete(from, root: root)
            return
        }
        let chunks = (try? index.file(folderID: folderID, path: from.path))??.chunks ?? []
        _ = syncFileSystem(root.fd)
        _ = try? index.upsertFiles([from.fileRecord(folderID: folderID),
                                    to.fileRecord(folderID: folderID, inode: inode(new.directory, new.name), chunks: chunks)])
    }

    /// Records a state whose disk side is already right (metadata, directories, keepLocal).
    private func record(_ state: FileState, root: DirectoryHandle) {
        var chunks: [FileChunkRecord] = []
        var inode: UInt64?
        if !state.deleted, let resolved = try? SafePath(state.path).resolve(under: root) {
            inode = self.inode(resolved.directory, resolved.name)
            chunks = (try? index.file(folderID: folderID, path: state.path))??.chunks ?? []
        }
        var state = state
        if !state.deleted, let resolved = try? SafePath(state.path).resolve(under: root) {
            var st = stat()
            if fstatat(resolved.directory.fd, resolved.name, &st, AT_SYMLINK_NOFOLLOW) == 0 {
                state.mtimeNs = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            }
        }
        _ = try? index.upsertFiles([state.fileRecord(folderID: folderID, inode: inode, chunks: state.kind == .file ? chunks : [])])
    }

    /// True when the file on disk is what the index last recorded (size, mtime, inode).
    private func diskMatchesIndex(_ path: String, root: DirectoryHandle) -> Bool {
        guard let record = (try? index.file(folderID: folderID, path: path)) ?? nil else { return true }
        guard let resolved = try? SafePath(path).resolve(under: root) else { return false }
        var st = stat()
        guard fstatat(resolved.directory.fd, resolved.name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return record.deleted }
        if record.deleted { return false }
        if record.kind == .directory { return (st.st_mode & S_IFMT) == S_IFDIR }
        let mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        return Int64(st.st_size) == record.size && mtime == record.mtimeNs
    }

    private func inode(_ directory: DirectoryHandle, _ name: String) -> UInt64? {
        var st = stat()
        guard fstatat(directory.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return UInt64(st.st_ino)
    }

    private func setTimes(_ directory: DirectoryHandle, _ name: String, _ mtimeNs: Int64) {
        var times = [timespec(tv_sec: 0, tv_nsec: utimeOmit),
                     timespec(tv_sec: Int(mtimeNs / 1_000_000_000), tv_nsec: Int(mtimeNs % 1_000_000_000))]
        utimensat(directory.fd, name, &times, AT_SYMLINK_NOFOLLOW)
    }

    /// `UTIME_OMIT` (not imported): leave that time as it is.
    let utimeOmit = (1 << 30) - 2

    static func tempName(_ name: String) -> String {
        "." + String(name.prefix(200)) + IgnorePatterns.temporarySuffix
    }
}

/// A flag set from several threads.
final class FailureFlag: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var value = false
    func set() { lock.lock(); value = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}

/// syncfs(2): flushes the whole file system holding `fd` (not exported by the Glibc module).
@_silgen_name("syncfs") func syncFileSystem(_ fd: Int32) -> Int32
