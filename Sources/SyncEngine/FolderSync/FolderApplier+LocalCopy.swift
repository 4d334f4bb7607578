#if canImport(Glibc)
internal import Glibc
#endif
internal import PeerFiles
internal import PeerIndex

/// Chunks a pull takes from local files. Every chunk is read and hashed before it is used: a
/// matching size, mtime and inode is no proof of content (bit rot, a program that wrote in
/// place and restored the mtime), and a corrupt local chunk taken into a peer's version would
/// be recorded as that version and spread with the next edit. From a file that still is what
/// the index recorded (same size, mtime and inode as when it was hashed), a verified range
/// is then copied in the kernel (`copy_file_range`); from any other file, the verified bytes
/// are written. A chunk that does not verify is fetched from a peer.
extension FolderApplier {
    /// A local file open as a source of chunks for one pull.
    final class LocalSource {
        let fd: Int32
        /// True when, at open, the file was exactly what the index records for it: the
        /// chunks that record lists (`holds`) are verified and copied in the kernel.
        let trusted: Bool
        private let stamp: FileStamp?
        /// The chunks the record lists (when trusted).
        private let recorded: Set<FileChunkRecord>

        init(fd: Int32, record: FileRecord?) {
            self.fd = fd
            stamp = FileStamp(fd)
            if let record, let stamp, !record.deleted, record.kind == .file {
                trusted = stamp.size == record.size && stamp.mtimeNs == record.mtimeNs
                    && (record.inode == nil || record.inode == stamp.inode)
            } else {
                trusted = false
            }
            recorded = trusted ? Set(record?.chunks ?? []) : []
        }

        /// True when the record the file matched lists this chunk at this place. A location
        /// looked up earlier may be stale: the file may have been replaced since, and
        /// recorded with other content (a batch of the same apply placed it). The bytes
        /// there are hashed before they are copied (`verified`): they may have rotted under
        /// an unchanged stamp.
        func holds(_ location: ChunkLocation, hash: ChunkHash) -> Bool {
            trusted && recorded.contains(FileChunkRecord(offset: location.offset, size: location.size, hash: hash.bytes))
        }

        deinit { close(fd) }

        /// True when the file has not changed (size, mtime, inode) since it was opened.
        var unchanged: Bool { stamp != nil && FileStamp(fd) == stamp }
    }

    /// Our own file at a path being pulled, open while its missing chunks are fetched:
    /// each one is asked for as a delta against what this file holds at the same range
    /// (`BlockDelta`), which after a change written in place is all of it but the changed
    /// blocks. Whatever it holds, the assembled chunk must match the chunk's hash.
    final class DeltaBase: Sendable {
        let fd: Int32

        init?(_ directory: DirectoryHandle, _ name: String) {
            // Non-blocking: a FIFO put there since the scan must not hang the pull (FileStamp
            // then refuses anything but a regular file).
            let fd = openat(directory.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else { return nil }
            guard FileStamp(fd) != nil else {
                close(fd)
                return nil
            }
            self.fd = fd
        }

        deinit { close(fd) }

        /// The sums of what the file holds at the chunk's range now, read 1 MiB at a time;
        /// nil when it ends before the range does.
        func sums(_ chunk: ChunkRef) -> [UInt8]? {
            try? BlockDelta.sums(of: chunk, in: ChunkReader(fileDescriptor: fd))
        }

        /// What the file holds at the chunk's range now; nil when it ends before the range does.
        func bytes(_ chunk: ChunkRef) -> [UInt8]? {
            let reader = ChunkReader(fileDescriptor: fd)
            return try? [UInt8](unsafeUninitializedCapacity: Int(chunk.size)) { buffer, count in
                try reader.read(at: chunk.offset, into: UnsafeMutableRawBufferPointer(buffer))
                count = buffer.count
            }
        }

        /// Chunks of at least two blocks whose delta answer fits in one frame are asked for
        /// as deltas; smaller ones whole.
        static func worthIt(_ chunk: ChunkRef) -> Bool {
            Int(chunk.size) >= BlockDelta.minimumChunk && BlockAsk.fitsDelta(Int(chunk.size))
        }
    }

    /// Size, mtime and inode of an open file.
    struct FileStamp: Equatable {
        let size: Int64
        let mtimeNs: Int64
        let inode: UInt64

        init?(_ fd: Int32) {
            var st = stat()
            guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
            size = Int64(st.st_size)
            mtimeNs = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            inode = UInt64(st.st_ino)
        }
    }

    /// The local files one pull reads chunks from, each opened once.
    final class LocalSources {
        private var open: [PathKey: LocalSource?] = [:]

        func source(_ location: ChunkLocation, applier: FolderApplier) -> LocalSource? {
            let key = PathKey(location.folderID + "\u{0}" + location.path)
            if let known = open[key] { return known }
            let source = applier.openSource(location)
            open[key] = source
            return source
        }

        /// The sources opened so far.
        var all: [LocalSource] { open.values.compactMap { $0 } }
    }

    /// Opens the file a location names (never following a link), with what the index
    /// records for it now; nil when it cannot be opened.
    func openSource(_ location: ChunkLocation) -> LocalSource? {
        // (An index that cannot say: no local source, the chunks come from peers; nothing else.)
        let rootPath = location.folderID == folderID ? folder.root : (try? index.folder(id: location.folderID))??.path
        guard let rootPath, let handle = try? DirectoryHandle(path: rootPath),
              let resolved = try? SafePath(location.path).resolve(under: handle), resolved.existing == .file else { return nil }
        // Non-blocking: a FIFO put there since the lookup must not hang the pull (FileStamp
        // then refuses anything but a regular file).
        let fd = openat(resolved.directory.fd, resolved.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        // (An index that cannot say: the source is not trusted, each chunk copied is hashed.)
        let record = (try? index.file(folderID: location.folderID, path: location.path)) ?? nil
        return LocalSource(fd: fd, record: record)
    }

    /// A range to copy from a trusted source into the temporary file.
    struct CopyRun {
        let source: LocalSource
        let from: UInt64
        let to: UInt64
        var length: UInt64
        /// The chunks of the run (verified afterwards if the source changed meanwhile).
        var chunks: [ChunkRef]
    }

    /// Where `chunk` can be taken from locally: a run from a trusted source (whose bytes are
    /// hashed before the copy), or the verified bytes from another one; nil when no local
    /// file holds it.
    func localPlan(_ chunk: ChunkRef, sources: LocalSources) -> LocalChunk? {
        let locations = (localLocations[chunk.hash.bytes] ?? []).filter { $0.size == Int64(chunk.size) }
        for location in locations {
            if let source = sources.source(location, applier: self), source.holds(location, hash: chunk.hash) {
                return .copy(source, from: UInt64(location.offset))
            }
        }
        for location in locations {
            guard let source = sources.source(location, applier: self) else { continue }
            let reader = ChunkReader(fileDescriptor: source.fd)
            let ref = ChunkRef(offset: UInt64(location.offset), size: chunk.size, hash: chunk.hash)
            if let bytes = try? reader.bytes(of: ref, verify: true) { return .bytes(bytes) }
        }
        return nil
    }

    enum LocalChunk {
        case copy(LocalSource, from: UInt64)
        case bytes([UInt8])
    }

    /// Adds `chunk`, found at `from` in `source`, to the runs (extending the last one when
    /// it continues it in both files).
    static func append(_ chunk: ChunkRef, from: UInt64, of source: LocalSource, to runs: inout [CopyRun]) {
        if var last = runs.last, last.source === source, last.from + last.length == from, last.to + last.length == chunk.offset {
            last.length += UInt64(chunk.size)
            last.chunks.append(chunk)
            runs[runs.count - 1] = last
        } else {
            runs.append(CopyRun(source: source, from: from, to: chunk.offset, length: UInt64(chunk.size), chunks: [chunk]))
        }
    }

    /// Copies the runs into `fd` once their chunks are verified; returns the chunks that are
    /// not there after all (their bytes in the source do not hash right, or the source
    /// shrank or changed during the copy and the copied bytes do not verify: they are
    /// fetched), or the errno of a failed write.
    func copy(_ runs: [CopyRun], into fd: Int32) -> (missing: [ChunkRef], error: Int32) {
        var (runs, missing) = Self.verified(runs)
        var copied: [CopyRun] = []
        for run in runs {
            let error = Self.copyRange(run.source.fd, from: run.from, into: fd, at: run.to, length: run.length)
            if error == ENODATA {
                missing += run.chunks   // the source ends earlier now
            } else if error != 0 {
                return ([], error)
            } else {
                copied.append(run)
            }
        }
        for run in copied {
            if run.source.unchanged {
                folder.activity.reused(bytes: Int(run.length))
                continue
            }
            // Written to while we copied: only what still verifies stays.
            for chunk in run.chunks {
                if Self.holds(fd, chunk) { folder.activity.reused(bytes: Int(chunk.size)) } else { missing.append(chunk) }
            }
        }
        return (missing, 0)
    }

    /// The runs without the chunks whose bytes in their source do not hash to the chunk's
    /// hash now (a run splits around such a chunk), and those chunks. Every chunk is read
    /// and hashed, on all cores (A 1 GiB file rebuilt from its own copy reads all of it).
    static func verified(_ runs: [CopyRun]) -> (runs: [CopyRun], failed: [ChunkRef]) {
        var items: [(run: Int, chunk: ChunkRef, from: UInt64)] = []
        for (n, run) in runs.enumerated() {
            for chunk in run.chunks { items.append((n, chunk, run.from + (chunk.offset - run.to))) }
        }
        guard !items.isEmpty else { return (runs, []) }
        let bad = ChunkReader.mismatches(items.map {
            ChunkReader.Check(fd: runs[$0.run].source.fd, offset: $0.from, size: $0.chunk.size, hash: $0.chunk.hash)
        })
        guard !bad.isEmpty else { return (runs, []) }
        var kept: [CopyRun] = []
        var dropped: [ChunkRef] = []
        for (n, item) in items.enumerated() {
            if bad.contains(n) { dropped.append(item.chunk) } else { append(item.chunk, from: item.from, of: runs[item.run].source, to: &kept) }
        }
        return (kept, dropped)
    }

    /// The copy goes in windows of this many bytes: the writeback of each one is started
    /// as soon as it is copied, and once the next one is copied, the window before is waited
    /// for and dropped from the page cache (`sync_file_range`, `POSIX_FADV_DONTNEED`). So the
    /// batch's barrier finds nearly everything on disk already, and a large copy dirties
    /// two windows of page cache, not its whole size: the freed pages are reused at once
    /// for the next window. On a VM that hands freed memory back to the host, fresh pages
    /// are what a large copy costs most (measured on the 2-core build machine, 1 GiB from
    /// the page cache to the same ext4 disk, up to durable: 3.4–4.5 s with fresh pages,
    /// 0.8–1.5 s this way).
    static let writebackInterval: UInt64 = 32 << 20

    /// Copies `length` bytes at `from` in `source` to `at` in `target`, in the kernel where it
    /// can (`copy_file_range`), with `pread`/`pwrite` where it cannot; 0 or the errno of the
    /// failure. A source shorter than the range is `ENODATA` (it changed since it was opened).
    static func copyRange(_ source: Int32, from: UInt64, into target: Int32, at: UInt64, length: UInt64) -> Int32 {
        var inOffset = Int64(from), outOffset = Int64(at)
        var left = length
        var window: (start: Int64, length: Int64) = (outOffset, 0)
        var previous: (start: Int64, length: Int64)?
        var kernel = true
        while left > 0 {
            let step = min(left, writebackInterval)
            var n: Int
            if kernel {
                n = copyFileRange(source, &inOffset, target, &outOffset, Int(step), 0)
                if n < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    if code == EXDEV || code == ENOSYS || code == EINVAL || code == EOPNOTSUPP || code == EBADF {
                        kernel = false
                        continue
                    }
                    return code
                }
            } else {
                let copied = copyInUserSpace(source, &inOffset, target, &outOffset, Int(step))
                if copied.error != 0 { return copied.error }
                n = copied.count
            }
            if n == 0 { return ENODATA }
            left -= UInt64(n)
            window.length += Int64(n)
            if UInt64(window.length) >= writebackInterval || left == 0 {
                // Starting the writeback is advice only; waiting for it (`release`) reports a
                // failed write here, because the wait consumes the error: a later fsync of
                // the same descriptor would return 0.
                _ = syncFileRange(target, window.start, window.length, syncFileRangeWrite)
                if let previous {
                    let failed = release(target, previous)
                    if failed != 0 { return failed }
                }
                previous = window
                window = (outOffset, 0)
            }
        }
        return 0
    }

    /// Waits for the writeback of a copied window and drops its pages from the cache; the
    /// errno of a failed write (EIO, ENOSPC), or 0.
    private static func release(_ fd: Int32, _ window: (start: Int64, length: Int64)) -> Int32 {
        var result: Int32
        repeat {
            result = syncFileRange(fd, window.start, window.length, syncFileRangeWaitBefore | syncFileRangeWrite | syncFileRangeWaitAfter)
        } while result != 0 && errno == EINTR
        if result != 0 { return errno }
        _ = posix_fadvise(fd, off_t(window.start), off_t(window.length), POSIX_FADV_DONTNEED)
        return 0
    }

    /// Up to `count` bytes read at `inOffset` and written at `outOffset` (both advanced);
    /// 0 bytes at the end of the source.
    private static func copyInUserSpace(_ source: Int32, _ inOffset: inout Int64, _ target: Int32, _ outOffset: inout Int64,
                                        _ count: Int) -> (count: Int, error: Int32) {
        let size = min(count, 1 << 20)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
        defer { buffer.deallocate() }
        var n: Int
        repeat { n = pread(source, buffer, size, off_t(inOffset)) } while n < 0 && errno == EINTR
        if n < 0 { return (0, errno) }
        var done = 0
        while done < n {
            let w = pwrite(target, buffer + done, n - done, off_t(outOffset) + off_t(done))
            if w < 0 && errno == EINTR { continue }
            guard w > 0 else { return (0, w == 0 ? ENOSPC : errno) }
            done += w
        }
        inOffset += Int64(n)
        outOffset += Int64(n)
        return (n, 0)
    }

    /// True when the file open at `fd` holds this chunk's bytes (they hash to its hash).
    static func holds(_ fd: Int32, _ chunk: ChunkRef) -> Bool {
        guard let bytes = try? ChunkReader(fileDescriptor: fd).bytes(of: chunk) else { return false }
        return ChunkHash.of(bytes) == chunk.hash
    }
}

/// copy_file_range(2) (not exported by the Glibc module).
@_silgen_name("copy_file_range")
func copyFileRange(_ fdIn: Int32, _ offIn: UnsafeMutablePointer<Int64>?, _ fdOut: Int32, _ offOut: UnsafeMutablePointer<Int64>?,
                   _ length: Int, _ flags: UInt32) -> Int

/// sync_file_range(2) (not exported by the Glibc module).
@_silgen_name("sync_file_range")
func syncFileRange(_ fd: Int32, _ offset: Int64, _ count: Int64, _ flags: UInt32) -> Int32

/// SYNC_FILE_RANGE_WRITE: start the writeback of dirty pages in the range, do not wait.
let syncFileRangeWrite: UInt32 = 2
/// SYNC_FILE_RANGE_WAIT_BEFORE and _WAIT_AFTER: wait for the writeback of the range.
let syncFileRangeWaitBefore: UInt32 = 1
let syncFileRangeWaitAfter: UInt32 = 4
