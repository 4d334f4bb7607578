#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// Growing files (hello feature `growing-files`): on the sending side, what a scan hashes is
/// told while it is hashed (`GrowingFiles`) and served before its entry exists; on the
/// receiving side, what a member tells is fetched ahead (`Prefetches`) for the pull to take.
extension SharedFolder {
    // MARK: - Sending side

    /// The scanner's word on a large file it is hashing (the scan's thread).
    func grew(_ event: GrowingFileEvent) {
        guard let note = growing.record(event) else { return }
        host?.announceGrowing(self, note)
    }

    /// A chunk of a file a scan is hashing or just hashed, not yet in the index, for a member's
    /// block request: only one told of that path (offset, size and hash as told), only while
    /// the folder's rules let us serve the path (`servesHeld`). Served as a chunk of an indexed
    /// file is (`servedChunk`: hashed from the bytes sent, a mismatch refused). No entry records
    /// this file yet, so a mismatch is a change under the scan, not damage: the stamp given for
    /// telling damage apart matches no file. Nil: not one of them, not as told, or not as hashed.
    func growingSource(path: String, offset: UInt64, size: UInt32, hash: [UInt8], streamed: Bool) -> BlockSource? {
        guard let chunk = growing.told(path: path, offset: offset, size: size, hash: hash), servesHeld(path),
              let safe = try? SafePath(path) else { return nil }
        return servedChunk(safe, chunk, streamed: streamed, indexed: NodeIndex.FileStamp(size: -1, mtimeNs: 0, inode: nil))
    }

    // MARK: - Receiving side

    /// Whether we take what `device` tells of `path` now: not paused, the path neither
    /// ignored nor outside the selection, and our role towards that member applies its
    /// changes (not send-only).
    func takesGrowing(_ path: String, from device: String) -> Bool {
        guard !paused.load(ordering: .relaxed), let ignores = currentIgnores(), !ignores.isIgnored(path, isDirectory: false),
              let roles = try? host?.index.folderPeerRoles(folderID: id) else { return false }
        return roles[device].map { PeerPolicy($0).role != .sendOnly } ?? true
    }

    /// A member's `growingFile` (on the node's queue): its chunks fetched ahead, into a
    /// temporary beside the path's place (whose directory must exist); no chunks: removed.
    func growingAnnounced(from device: String, path: String, scan: UInt64, size: UInt64, offset: UInt64, chunks: [ChunkRef]) {
        guard let safe = try? SafePath(path) else { return }
        if chunks.isEmpty { return prefetch.abandon(device: device, path: safe.string, scan: scan) }
        let found = prefetch.file(device: device, path: safe.string, scan: scan, size: size) { () -> (DirectoryHandle, String, Int32)? in
            guard offset == 0, takesGrowing(safe.string, from: device),
                  let rootHandle = try? DirectoryHandle(path: root), let resolved = try? safe.resolve(under: rootHandle),
                  resolved.existing != .directory else { return nil }
            let name = Prefetches.tempName(forPath: safe.string)
            let fd = openat(resolved.directory.fd, name, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return nil }
            return (resolved.directory, name, fd)
        }
        guard let (file, new) = found else { return }
        guard file.add(offset: offset, chunks) else { return prefetch.remove(file) }
        if new { expireLater(file, after: prefetch.expiry.withLock { $0 }) }
        fetchAhead(file)
    }

    /// Asks the member for the file's queued chunks that fit its in-flight budget; each answer
    /// is verified and written (large ones off the node's queue), and asks for more.
    private func fetchAhead(_ file: Prefetches.File) {
        guard let host else { return }
        let wants = file.nextRequests().map { chunk in
            BlockWant(device: file.device, folder: id, path: file.path, offset: chunk.offset, size: chunk.size,
                      hash: chunk.hash.bytes, sums: nil) { [self] reply in
                let answer: @Sendable () -> Void = { [self] in
                    var bytes: [UInt8]?
                    if case let .whole(data) = reply { bytes = data }
                    if file.arrived(chunk, bytes) {
                        activity.fetched(path: file.path, from: file.device, bytes: Int(chunk.size))
                    }
                    fetchAhead(file)
                }
                if chunk.size >= FolderApplier.largeBlock { FolderApplier.verifyQueue.async(execute: answer) } else { answer() }
            }
        }
        host.requestBlocks(wants)
    }

    /// Removes `file` once no announcement came for it within the expiry.
    private func expireLater(_ file: Prefetches.File, after delay: Duration) {
        let (seconds, attoseconds) = delay.components
        let nanos = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(max(1_000_000, nanos))) { [weak self] in
            guard let self, let left = prefetch.expire(file) else { return }
            expireLater(file, after: left)
        }
    }
}
