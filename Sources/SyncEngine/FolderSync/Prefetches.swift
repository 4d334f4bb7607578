#if canImport(Glibc)
internal import Glibc
#endif
internal import PeerFiles
internal import Synchronization

/// The receiving side of growing-file announcements (`Frame.growingFile`, `GrowingFiles`):
/// chunks of a file a member is still hashing, fetched and verified into a temporary file of
/// their own before the file's index entry exists. Nothing is recorded in the index and
/// nothing placed: when the entry comes, its pull takes the temporary over (`claim`) with
/// the chunks that are exactly those of its manifest, and fetches only the rest.
///
///     growingFile ─▶ `file(…)` + `File.add` ─▶ block requests (verified) ─▶ `File.arrived` writes
///     index entry ─▶ pull ─▶ `claim`: renamed onto the pull's temporary, its chunks held
///
/// Bounds against a hostile member: at most `maxPerMember` files of one member and
/// `maxFiles` in all per folder (a new one beyond is not fetched), at most `maxChunks` chunks
/// each, `inFlightBytes` asked and unanswered per file; a file that no pull takes within
/// `expiry` of its last announcement is removed, as is one whose hashing the member
/// abandons. The temporary is named like a pull's (`.<32 hex>.syncpeer-tmp`, from the path
/// and a zero byte that no path holds), so scans and watchers ignore it and a restart removes it.
final class Prefetches: Sendable {
    static let maxPerMember = 4
    static let maxFiles = 8
    static let maxChunks = 65_536
    static let inFlightBytes = 16 << 20

    /// One file being fetched ahead of its entry.
    final class File: Sendable {
        let device: String
        let scan: UInt64
        let path: String
        let directory: DirectoryHandle
        let name: String

        struct Inner {
            var fd: Int32
            var size: UInt64
            var queued: [ChunkRef] = []
            var inFlight = 0
            /// Where the next announced chunk must start.
            var end: UInt64 = 0
            var announced = 0
            /// Offset → chunk, written and verified.
            var verified: [UInt64: ChunkRef] = [:]
            var touched: ContinuousClock.Instant = .now
            var closed = false
        }
        let inner: Mutex<Inner>

        init(device: String, scan: UInt64, path: String, size: UInt64, directory: DirectoryHandle, name: String, fd: Int32) {
            (self.device, self.scan, self.path, self.directory, self.name) = (device, scan, path, directory, name)
            inner = Mutex(Inner(fd: fd, size: size))
        }

        /// Queues announced chunks; false when they do not follow what was announced (or exceed a bound).
        func add(offset: UInt64, _ chunks: [ChunkRef]) -> Bool {
            inner.withLock { inner in
                guard !inner.closed, offset == inner.end, inner.announced + chunks.count <= Prefetches.maxChunks,
                      (chunks.last?.end ?? offset) <= inner.size else { return false }
                inner.queued += chunks
                inner.announced += chunks.count
                inner.end = chunks.last?.end ?? offset
                inner.touched = .now
                return true
            }
        }

        /// The queued chunks that fit the in-flight budget now (counted in flight).
        func nextRequests() -> [ChunkRef] {
            inner.withLock { inner in
                var out: [ChunkRef] = []
                while !inner.closed, !inner.queued.isEmpty, inner.inFlight < Prefetches.inFlightBytes {
                    let chunk = inner.queued.removeFirst()
                    inner.inFlight += Int(chunk.size)
                    out.append(chunk)
                }
                return out
            }
        }

        /// A chunk's answer (any thread): written at its offset when its bytes match, unless
        /// the file was taken over or removed meanwhile. True when written.
        func arrived(_ chunk: ChunkRef, _ bytes: [UInt8]?) -> Bool {
            let good = bytes.map { $0.count == Int(chunk.size) && ChunkHash.of($0) == chunk.hash } ?? false
            return inner.withLock { inner in
                inner.inFlight -= Int(chunk.size)
                guard good, let bytes, !inner.closed, FolderApplier.write(bytes, at: chunk.offset, inner.fd) == 0 else { return false }
                if chunk.size >= FolderApplier.largeBlock {
                    _ = syncFileRange(inner.fd, Int64(chunk.offset), Int64(chunk.size), syncFileRangeWrite)
                }
                inner.verified[chunk.offset] = chunk
                return true
            }
        }

        /// Stops it; removes its temporary unless `keep`.
        func close(unlink: Bool = true) {
            inner.withLock { inner in
                guard !inner.closed else { return }
                inner.closed = true
                Glibc.close(inner.fd)
                if unlink { unlinkat(directory.fd, name, 0) }
            }
        }

        /// Takes it over for a pull of `manifest`: renamed to `temp` in `target`, and the offsets of
        /// the chunks it holds that are the manifest's own (same offset, size and hash); nil
        /// (and removed) when it holds none or cannot be renamed.
        func handOver(_ manifest: Manifest, to target: DirectoryHandle, temp: String) -> (offsets: Set<UInt64>, bytes: Int64)? {
            inner.withLock { inner in
                guard !inner.closed else { return nil }
                inner.closed = true
                Glibc.close(inner.fd)
                var offsets = Set<UInt64>()
                var bytes: Int64 = 0
                for chunk in manifest.chunks where inner.verified[chunk.offset] == chunk {
                    offsets.insert(chunk.offset)
                    bytes += Int64(chunk.size)
                }
                guard !offsets.isEmpty, renameat(directory.fd, name, target.fd, temp) == 0 else {
                    unlinkat(directory.fd, name, 0)
                    return nil
                }
                return (offsets, bytes)
            }
        }

        var lastAnnouncement: ContinuousClock.Instant { inner.withLock { $0.touched } }
    }

    private let files = Mutex<[PathKey: File]>([:])
    /// A file no pull took within this of its last announcement is removed (`SYNCPEER_PREFETCH_EXPIRY_MS`).
    let expiry = Mutex<Duration>(.seconds(30))
    /// Bytes fetched ahead and then taken by pulls (status `prefetchedBytes`).
    let taken = Atomic<Int64>(0)

    /// What is fetched ahead now, for `status`: each file's path, member, size when its
    /// hashing began, bytes told so far and bytes fetched and verified.
    func progress() -> [(path: String, device: String, size: Int64, told: Int64, fetched: Int64)] {
        files.withLock { Array($0.values) }.map { file in
            file.inner.withLock { inner in
                (file.path, file.device, Int64(inner.size), Int64(inner.end), inner.verified.values.reduce(0) { $0 + Int64($1.size) })
            }
        }
    }

    /// The temporary name of a prefetch of `path` (see the type's comment).
    static func tempName(forPath path: String) -> String {
        "." + NameTag.hex(of: Array(path.utf8) + [0], digits: 32) + IgnorePatterns.temporarySuffix
    }

    /// The file of this announcement: the one being fetched, or a new one (`open` makes its
    /// temporary) that replaces an older hashing of the path; nil when the bounds leave no
    /// room or `open` cannot. Returns whether it is new.
    func file(device: String, path: String, scan: UInt64, size: UInt64,
              open: () -> (DirectoryHandle, String, Int32)?) -> (file: File, new: Bool)? {
        let key = PathKey(path)
        var replaced: File?
        defer { replaced?.close() }
        return files.withLock { files -> (File, Bool)? in
            if let found = files[key] {
                if found.device == device && found.scan == scan { return (found, false) }
                // Another member's hashing of the same path is not replaced by this one.
                guard found.device == device else { return nil }
                replaced = files.removeValue(forKey: key)
            }
            guard files.count < Self.maxFiles, files.values.count(where: { $0.device == device }) < Self.maxPerMember,
                  let (directory, name, fd) = open() else { return nil }
            let file = File(device: device, scan: scan, path: path, size: size, directory: directory, name: name, fd: fd)
            files[key] = file
            return (file, true)
        }
    }

    /// The member abandoned that hashing (or sent what does not follow): removed.
    func remove(_ file: File) {
        let gone = files.withLock { files -> Bool in
            guard files[PathKey(file.path)] === file else { return false }
            files[PathKey(file.path)] = nil
            return true
        }
        if gone { file.close() }
    }

    /// The member abandoned that hashing of `path`: removed, if it is the one fetched ahead.
    func abandon(device: String, path: String, scan: UInt64) {
        let gone = files.withLock { files -> File? in
            let key = PathKey(path)
            guard let file = files[key], file.device == device, file.scan == scan else { return nil }
            return files.removeValue(forKey: key)
        }
        gone?.close()
    }

    /// The file of `path` fetched ahead, for its pull (`File.handOver`); nil when there is none.
    func claim(path: String, manifest: Manifest, into target: DirectoryHandle, temp: String) -> Set<UInt64>? {
        guard let file = files.withLock({ $0.removeValue(forKey: PathKey(path)) }),
              let (offsets, bytes) = file.handOver(manifest, to: target, temp: temp) else { return nil }
        taken.add(bytes, ordering: .relaxed)
        return offsets
    }

    /// Removes `file` if no announcement came for it within `expiry`; else the time left.
    func expire(_ file: File, now: ContinuousClock.Instant = .now) -> Duration? {
        let expiry = expiry.withLock { $0 }
        let left = file.lastAnnouncement + expiry - now
        guard left <= .zero else { return left }
        remove(file)
        return nil
    }

    /// Removes every file (the folder stops, or is paused).
    func removeAll() {
        for file in files.withLock({ files in defer { files = [:] }; return Array(files.values) }) { file.close() }
    }

    /// Files being fetched ahead now.
    var count: Int { files.withLock { $0.count } }
}
