#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// `syncpeer restore PATH [--at TIME | --version ID] [--to NEWPATH]`: brings versions back
/// from this node's store or from a member that holds them, every chunk verified, as a new
/// local change (the folder scans it and it syncs out). What is at the target is kept as a
/// version first.
extension FolderService {
    /// One version chosen for a path, with the devices that hold its content.
    struct RestorePick {
        var entry: VersionEntry
        var id: String
        /// Devices holding it, ours first when we do.
        var holders: [KnownVersion]
    }

    /// `at` (unix ms): the version that was current then of each path (the first kept after
    /// it whose modification time is not after it: content written later was not there yet);
    /// `version`: that one; neither: the newest of each path.
    static func pick(_ known: [KnownVersion], at: Int64?, version: String?) -> [RestorePick] {
        func id(_ k: KnownVersion) -> String { String(k.device.prefix(7)) + "-" + String(k.entry.id) }
        var chosen: [String: KnownVersion] = [:]
        if let version {
            guard let one = known.first(where: { id($0) == version }) else { return [] }
            chosen[one.entry.path] = one
        } else {
            for k in known {
                if let at, k.entry.keptAt < at || k.entry.mtimeNs / 1_000_000 > at { continue }
                guard let current = chosen[k.entry.path] else { chosen[k.entry.path] = k; continue }
                let better = at == nil ? k.entry.keptAt > current.entry.keptAt : k.entry.keptAt < current.entry.keptAt
                if better { chosen[k.entry.path] = k }
            }
        }
        return chosen.values.sorted { $0.entry.path < $1.entry.path }.map { choice in
            let holders = known.filter { $0.entry.path == choice.entry.path && $0.entry.rootHash == choice.entry.rootHash && $0.entry.held }
                .sorted { $0.local && !$1.local }
            return RestorePick(entry: choice.entry, id: id(choice), holders: holders)
        }
    }

    /// `progress` gets the restore's `transfer` events (`RestoreProgress`).
    func restore(path: String, at: Int64?, version: String?, to: String?,
                 progress emit: ((TransferInfo) -> Void)? = nil) throws(EngineError) -> RestoreResult {
        let (folder, relative) = try folder(holding: path)
        guard let keeper = versions else { throw .io(path: path, reason: "this node keeps no versions") }
        let picks = Self.pick(try knownVersions(folder: folder, relative: relative).versions, at: at, version: version)
        guard !picks.isEmpty else {
            throw .notFound(version.map { "no version \($0) of \(path) on this node or its connected peers" }
                ?? "no version of \(path)\(at == nil ? "" : " kept after that time") on this node or its connected peers")
        }
        var result = RestoreResult(folder: folder.id, restored: [], failed: [])
        var scan: [String] = []
        let chosen = picks.prefix(RestoreResult.limit)
        // Sizes come from peers: added without overflow.
        func plus(_ total: Int64, _ size: UInt64) -> Int64 {
            let (sum, over) = total.addingReportingOverflow(Int64(clamping: size))
            return over ? Int64.max : sum
        }
        let progress = RestoreProgress(name: relative.isEmpty ? folder.label : relative, total: chosen.reduce(0) { plus($0, $1.entry.size) },
                                       files: chosen.count, emit: emit ?? { _ in })
        var end: Int64 = 0
        for pick in chosen {
            end = plus(end, pick.entry.size)
            // Where it goes: its own path, or `to` in place of the path asked for.
            let suffix = relative.isEmpty ? pick.entry.path : String(pick.entry.path.dropFirst(relative.count))
            let target: String
            if let to {
                let base = URL(fileURLWithPath: to).standardizedFileURL.path
                target = relative.isEmpty ? base + "/" + suffix : base + suffix
            } else {
                target = folder.root + "/" + pick.entry.path
            }
            progress.file(target)
            switch restoreOne(pick, to: target, folder: folder, keeper: keeper, progress: progress) {
            case let .success((from, bytes)):
                result.restored.append(.init(path: target, version: pick.id, from: from, bytes: bytes))
                if target.hasPrefix(folder.root + "/") { scan.append(String(target.dropFirst(folder.root.count + 1))) }
            case let .failure(reason):
                result.failed.append(.init(path: target, reason: reason.message))
            }
            progress.skip(to: end)
        }
        progress.finish(failed: result.failed.count)
        if picks.count > RestoreResult.limit {
            result.failed.append(.init(path: path, reason: "\(picks.count - RestoreResult.limit) more version(s) not restored: at most \(RestoreResult.limit) at once"))
        }
        if !scan.isEmpty { folder.io.async { [scan] in folder.fullScanPaths(scan) } }
        return result
    }

    struct RestoreFailure: Error { let message: String }

    /// Writes one version at `target` (absolute): its manifest, then every chunk from our
    /// store or from the holders (`RestoreFetch`), verified, into a temporary file beside the
    /// target, then the rename. Returns where the chunks came from and the size.
    private func restoreOne(_ pick: RestorePick, to target: String, folder: SharedFolder, keeper: VersionKeeper,
                            progress: RestoreProgress) -> Result<(String, Int64), RestoreFailure> {
        guard !pick.holders.isEmpty else { return .failure(.init(message: "no connected device holds this version's content")) }
        let manifest: Manifest?
        do throws(IndexError) { manifest = try self.manifest(of: pick, folder: folder) } catch {
            return .failure(.init(message: "cannot read the version's chunk list: \(error)"))
        }
        guard let manifest else {
            return .failure(.init(message: "cannot get the version's chunk list from a device that holds it"))
        }
        let url = URL(fileURLWithPath: target)
        let directoryPath = url.deletingLastPathComponent().path
        let name: String
        let directory: DirectoryHandle
        if target.hasPrefix(folder.root + "/") {
            // Inside the folder: resolved under its root (no symlink or ".." leads out of it).
            do {
                let resolved = try SafePath(String(target.dropFirst(folder.root.count + 1)))
                    .resolve(under: try DirectoryHandle(path: folder.root), createDirectories: true)
                (directory, name) = (resolved.directory, resolved.name)
            } catch {
                return .failure(.init(message: "cannot reach \(target) in the folder: \(error)"))
            }
        } else {
            // Elsewhere (`--to`): where the user said.
            do {
                try FileManager.default.createDirectory(atPath: directoryPath, withIntermediateDirectories: true)
            } catch {
                return .failure(.init(message: "cannot create \(directoryPath): \(PlainText.reason(error))"))
            }
            guard let handle = try? DirectoryHandle(path: directoryPath) else {
                return .failure(.init(message: "cannot open \(directoryPath)"))
            }
            (directory, name) = (handle, url.lastPathComponent)
        }
        let temp = FolderApplier.tempName(forPath: "restore/" + pick.entry.path)
        let fd = openat(directory.fd, temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return .failure(.init(message: "cannot create a temporary file in \(directoryPath)")) }
        var closed = false
        defer { if !closed { close(fd); unlinkat(directory.fd, temp, 0) } }
        var sources = Set<String>()
        var writeError: Int32 = 0
        func write(_ chunk: ChunkRef, _ bytes: [UInt8], from device: String) -> Bool {
            let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(chunk.offset)) }
            guard written == bytes.count else {
                writeError = errno
                return false
            }
            sources.insert(device)
            progress.add(Int64(bytes.count))
            return true
        }
        // Ours first, from the store; the rest from the holders, several at once.
        var missing: [ChunkRef] = []
        for chunk in manifest.chunks {
            guard let bytes = keeper.store.read(chunk.hash, size: Int(chunk.size)) else {
                missing.append(chunk)
                continue
            }
            guard write(chunk, bytes, from: localDevice) else {
                return .failure(.init(message: "cannot write \(target): \(String(cString: strerror(writeError)))"))
            }
        }
        let fetch = RestoreFetch(holders: pick.holders.filter { !$0.local }.map(\.device)) { [self] device, chunk, answer in
            requestBlock(device: device, folder: folder.id, path: pick.entry.path, offset: chunk.offset, size: chunk.size,
                         hash: chunk.hash.bytes, sums: nil) { reply in
                if case let .whole(bytes) = reply { answer(bytes) } else { answer(nil) }
            }
        }
        let failure = fetch.run(missing) { chunk, bytes, device in
            // Kept here too (a torn one would fail its hash when read): the next restore is local.
            keeper.store.put(bytes, hash: chunk.hash)
            return write(chunk, bytes, from: device)
        }
        switch failure {
        case nil:
            break
        case let .unavailable(offset):
            return .failure(.init(message: "chunk at \(offset) is held by no connected device (or did not verify)"))
        case .write:
            return .failure(.init(message: "cannot write \(target): \(String(cString: strerror(writeError)))"))
        }
        ftruncate(fd, off_t(manifest.fileSize))
        var times = [timespec(tv_sec: 0, tv_nsec: FolderApplier.utimeOmit),
                     timespec(tv_sec: Int(pick.entry.mtimeNs / 1_000_000_000), tv_nsec: Int(pick.entry.mtimeNs % 1_000_000_000))]
        futimens(fd, &times)
        fchmod(fd, 0o644)
        guard fsync(fd) == 0 else { return .failure(.init(message: "cannot flush \(target): \(String(cString: strerror(errno)))")) }
        close(fd)
        closed = true
        // What is at the target now is kept (it may be the only copy of an edit); when the
        // index cannot say what it is, it stays and this path fails with the cause.
        var current: FileRecord?
        if target.hasPrefix(folder.root + "/"), directory.entryKind(name) == .file {
            do throws(IndexError) { current = try index.file(folderID: folder.id, path: String(target.dropFirst(folder.root.count + 1))) } catch {
                unlinkat(directory.fd, temp, 0)
                return .failure(.init(message: "not replaced: cannot read what the index records for it: \(error)"))
            }
        }
        if let current, directory.exchange(temp, name) {
            // Swapped out to the temporary name, where nothing puts it back: the recorded
            // version is kept from there, a large one as its own inode (a pack, nothing copied).
            if Self.isRecorded(temp, in: directory, current) {
                keeper.keep(current, swappedOut: temp, in: directory, reason: "restore")
            } else {
                keeper.keep(current, from: try? ChunkReader(name: temp, in: directory), reason: "restore")
            }
            unlinkat(directory.fd, temp, 0)
        } else {
            // Kept first (a copy of what the store lacks), then replaced.
            if let current { keeper.keep(current, from: try? ChunkReader(name: name, in: directory), reason: "restore") }
            guard renameat(directory.fd, temp, directory.fd, name) == 0 else {
                let reason = String(cString: strerror(errno))
                unlinkat(directory.fd, temp, 0)
                return .failure(.init(message: "cannot put it in place: \(reason)"))
            }
        }
        fsync(directory.fd)
        let from = sources.count == 1 && sources.first == localDevice ? "local"
            : sources.filter { $0 != localDevice }.map { String($0.prefix(7)) }.sorted().joined(separator: ",")
        return .success((from, Int64(manifest.fileSize)))
    }

    /// Whether `name` is the regular file `record` describes (its size and mtime, as the
    /// scanner compares): only then may its inode be kept for that version.
    private static func isRecorded(_ name: String, in directory: DirectoryHandle, _ record: FileRecord) -> Bool {
        var st = stat()
        return fstatat(directory.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mode & S_IFMT == S_IFREG
            && Int64(st.st_size) == record.size && Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec) == record.mtimeNs
    }

    /// The version's chunk list: from our index, or asked of a holder (its root hash must be
    /// the listed one, and the manifest must decode under the wire's limits). Our index
    /// failing to read it throws its error.
    private func manifest(of pick: RestorePick, folder: SharedFolder) throws(IndexError) -> Manifest? {
        for holder in pick.holders {
            if holder.local {
                guard let id = Int64(exactly: holder.entry.id), let record = try index.version(folderID: folder.id, id: id),
                      let manifest = try? Manifest(fileSize: UInt64(record.size), chunks: record.chunks.compactMap(\.chunkRef)),
                      manifest.rootHash == pick.entry.rootHash else { continue }
                return manifest
            }
            let answer = Mutex<VersionPage?>(nil)
            let done = DispatchSemaphore(value: 0)
            requestVersions(device: holder.device, folderID: folder.id, path: holder.entry.path, tree: false, before: 0,
                            version: holder.entry.id) { page in
                answer.withLock { $0 = page }
                done.signal()
            }
            done.wait()
            guard let entry = answer.withLock({ $0 })?.entries.first, entry.path == pick.entry.path,
                  let manifest = try? Manifest.decode(entry.manifest), manifest.rootHash == pick.entry.rootHash else { continue }
            return manifest
        }
        return nil
    }
}
