internal import Glibc
internal import PeerModel

/// Walks a shared folder and reports what differs from what the caller knows: added and
/// changed entries (with fresh chunk manifests for files whose content changed) and
/// deleted paths, in batches through a callback so that a caller can write each batch in
/// one transaction.
///
/// - Symbolic links are recorded with their target and never followed (not even the
///   ones that point inside the folder). FIFOs, sockets and devices are skipped.
/// - Everything is opened relative to directory descriptors (`openat`, `fdopendir`,
///   `fstatat` with `AT_SYMLINK_NOFOLLOW`), so a path is never re-resolved from a string.
/// - A file whose size, mtime and inode equal the known ones is not read: its known
///   manifest is reused (a mode change alone is reported with the known manifest).
/// - A file that changes while it is read (size or mtime differ after hashing) is
///   reported as `unstable` only, to be rescanned later.
/// - Memory: the walk visits paths in UTF-8 byte order and merges them with the
///   caller's known entries in the same order (`KnownEntrySource`), so neither set is
///   held in memory: only the listing of the directories on the current path and one
///   batch are.
/// - A root that is missing, not a directory, or not the expected directory
///   (`expectedRoot`) throws `ScanError.rootMissing`; the root is checked again before
///   every batch that reports deletions and at the end, so a folder that vanishes during
///   a scan never turns into a mass deletion.
///
/// Ignore patterns: entries they match are never reported, ignored directories are not
/// entered, and known entries that are now ignored are not reported as deleted.
///
/// The scanner is a value; a scan runs on the caller's thread (it blocks on disk I/O).
package struct FolderScanner: Sendable {
    /// The folder root as the user gave it (a symbolic link here is followed: it is the
    /// user's choice).
    package var rootPath: String
    package var ignores: IgnorePatterns
    /// Items (added, changed, deleted, unstable, problems) in the first batch.
    package var batchSize: Int
    /// Each batch after the first may hold twice as many items as the one before, up to this
    /// many (at least `batchSize`): a long scan's first changes reach the caller soon, and
    /// the rest in fewer, larger batches (each one transaction for a caller that records
    /// them: D, 50,000 new files, rewrote the same index pages to the WAL 50 times).
    package var maxBatchSize: Int {
        get { max(batchSize, batchCeiling) }
        set { batchCeiling = newValue }
    }
    private var batchCeiling = 0
    /// A batch is also full once its manifests hold this many chunks (~5 MB), whatever its
    /// item count: thousands of large files' manifests are not held at once.
    package var maxBatchChunks = 100_000
    /// Threads hashing one large file (≥ 4 MiB); small files are hashed on the caller's thread.
    package var hashThreads: Int
    /// When set, a root that is another directory (device, inode) is `rootMissing`: a
    /// disk unmounted from under its mount point leaves an empty directory there.
    package var expectedRoot: RootIdentity?
    /// When set, the quick sums of large files' chunks are kept here, and a large file that
    /// changed is re-chunked from its known manifest (`DeltaChunker`), not whole.
    package var chunkSums: ChunkSumCache?
    /// Files of at least this size are told of while they are hashed (`onGrowing`).
    package var growingFrom: UInt64 = .max
    /// Called on the scan's thread with the chunks of a large file as they are cut (in
    /// batches, `GrowingFileEvent.batchBytes`), and when its hashing ends without an entry.
    package var onGrowing: (@Sendable (GrowingFileEvent) -> Void)?
    /// Tests: called with the relative path after a file was read, before it is checked
    /// for changes made during the read.
    var afterReadHook: (@Sendable (String) -> Void)?

    package init(root: String, ignores: IgnorePatterns = IgnorePatterns(), batchSize: Int = 1_000,
                hashThreads: Int = 2, expectedRoot: RootIdentity? = nil) {
        self.rootPath = root
        self.ignores = ignores
        self.batchSize = max(1, batchSize)
        self.hashThreads = max(1, hashThreads)
        self.expectedRoot = expectedRoot
    }

    /// Scans the whole folder against `known`. `onBatch` is called on this thread with
    /// each non-empty batch (the last one may be smaller); an error it throws stops the scan.
    @discardableResult
    package func scan(known: some KnownEntrySource, onBatch: (ScanBatch) throws -> Void) throws -> ScanSummary {
        try withoutActuallyEscaping(onBatch) { onBatch in
            let run = try ScanRun(scanner: self, onBatch: onBatch)
            defer { run.close() }
            try run.scanAll(known: known)
            return run.summary
        }
    }

    /// Rescans only `paths` (relative; a directory with everything below it), e.g. the
    /// paths a `FolderWatcher` reported. A path that is gone is reported as deleted with
    /// everything known below it; "" means the whole folder.
    @discardableResult
    package func scan(paths: [String], known: some KnownEntrySource,
                     onBatch: (ScanBatch) throws -> Void) throws -> ScanSummary {
        try withoutActuallyEscaping(onBatch) { onBatch in
            try scan(paths: paths, known: known, run: ScanRun(scanner: self, onBatch: onBatch))
        }
    }

    private func scan(paths: [String], known: some KnownEntrySource, run: ScanRun) throws -> ScanSummary {
        defer { run.close() }
        // Sorted in byte order, without paths below another given path (covered by it).
        // (A folder moved in comes from the watcher as every path in it, 55,000 in D: a path
        // that is already clean is taken as it is, and none is built again to be compared.)
        var cleaned = Set<PathKey>()
        cleaned.reserveCapacity(paths.count)
        for p in paths {
            if Self.isClean(p) {
                cleaned.insert(PathKey(p))
                continue
            }
            let parts = p.split(separator: "/", omittingEmptySubsequences: true)
            if parts.isEmpty { try run.scanAll(known: known); return run.summary }
            cleaned.insert(PathKey(parts.joined(separator: "/")))
        }
        var previous: String?
        for key in cleaned.sorted() {
            if let previous, Self.isBelow(key.string, previous) { continue }
            previous = key.string
            try run.scanOne(key.string, known: known)
        }
        try run.finish()
        return run.summary
    }

    /// Whether `path` is relative with no empty component: no leading, trailing or doubled "/".
    static func isClean(_ path: String) -> Bool {
        var previous: UInt8 = UInt8(ascii: "/")
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/") && previous == byte { return false }
            previous = byte
        }
        return previous != UInt8(ascii: "/")
    }

    /// Whether `path` is strictly below `directory` ("d/x" is below "d", "dx" is not).
    static func isBelow(_ path: String, _ directory: String) -> Bool {
        let (p, d) = (path.utf8, directory.utf8)
        guard p.count > d.count, p.starts(with: d) else { return false }
        return p[p.index(p.startIndex, offsetBy: d.count)] == UInt8(ascii: "/")
    }

    /// Read buffer size for a file of `size` bytes (the chunks do not depend on it).
    static func readBlockSize(for size: UInt64) -> Int {
        Int(min(UInt64(FileChunker.defaultReadBlockSize), max(64 << 10, size + 1)))
    }
}

/// One entry of a directory listing, or the instruction to enter a directory.
private struct WalkItem {
    var name: String
    /// Sort key: the name's bytes, plus "/" for the descend item of a directory.
    var key: [UInt8]
    var descend: Bool
    var kind: FileKind
    var size: UInt64
    var mtimeNs: Int64
    var mode: UInt32
    var inode: UInt64
}

/// An open directory being walked.
private final class WalkFrame {
    let fd: Int32
    /// Relative path of the directory ("" for the root).
    let path: String
    /// Its components as bytes (for ignore matching).
    let components: [[UInt8]]
    var items: [WalkItem]
    var next = 0

    init(fd: Int32, path: String, components: [[UInt8]], items: [WalkItem]) {
        self.fd = fd
        self.path = path
        self.components = components
        self.items = items
    }

    func child(_ name: String) -> String { path.isEmpty ? name : path + "/" + name }
}

/// The state of one scan.
private final class ScanRun {
    let scanner: FolderScanner
    let onBatch: (ScanBatch) throws -> Void
    let rootFd: Int32
    let rootIdentity: RootIdentity
    var summary = ScanSummary()
    var batch = ScanBatch()
    /// Items the current batch may hold (`FolderScanner.batchSize`, doubled per batch).
    var batchLimit: Int
    /// Chunks in the manifests of the current batch.
    var batchChunks = 0
    var known: (any IteratorProtocol<ScannedEntry>)?
    var peeked: ScannedEntry?
    var lastKnownPath: String?
    var stack: [WalkFrame] = []
    /// The read buffers of the files this scan reads (one at a time, on its thread).
    let buffers = ChunkBuffers()

    init(scanner: FolderScanner, onBatch: @escaping (ScanBatch) throws -> Void) throws {
        self.scanner = scanner
        self.onBatch = onBatch
        batchLimit = scanner.batchSize
        let fd = open(scanner.rootPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR {
                throw ScanError.rootMissing(path: scanner.rootPath, reason: code == ENOENT ? "it does not exist" : "it is not a directory")
            }
            throw ScanError.rootUnreadable(FileError.system("open directory", path: scanner.rootPath, errno: code))
        }
        var st = stat()
        fstat(fd, &st)
        rootFd = fd
        rootIdentity = RootIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
        summary.root = rootIdentity
        if let expected = scanner.expectedRoot, expected != rootIdentity {
            Glibc.close(fd)
            throw ScanError.rootMissing(path: scanner.rootPath,
                                        reason: "it is another directory than before (an unmounted disk?)")
        }
    }

    func close() {
        for frame in stack { Glibc.close(frame.fd) }
        stack.removeAll()
        Glibc.close(rootFd)
    }

    /// The root path still names the directory this scan started with.
    func checkRoot() throws {
        var st = stat()
        guard stat(scanner.rootPath, &st) == 0 else {
            throw ScanError.rootMissing(path: scanner.rootPath, reason: "it vanished during the scan")
        }
        guard st.st_mode & S_IFMT == S_IFDIR,
              RootIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) == rootIdentity else {
            throw ScanError.rootMissing(path: scanner.rootPath, reason: "it was replaced during the scan")
        }
    }

    // MARK: Scans

    func scanAll(known source: some KnownEntrySource) throws {
        startKnown(source.knownEntries(under: ""))
        movedFile = source.movedFile
        let copy = dup(rootFd)
        guard copy >= 0 else { throw ScanError.rootUnreadable(FileError.system("dup", path: scanner.rootPath, errno: errno)) }
        guard let items = list(copy, path: "", components: []) else {
            Glibc.close(copy)
            throw ScanError.rootUnreadable(FileError.system("read directory", path: scanner.rootPath, errno: errno))
        }
        stack.append(WalkFrame(fd: copy, path: "", components: [], items: items))
        try walk()
        try drainKnown(before: nil)
        try finish()
    }

    /// Rescans `path` and below (its known entries are merged as in a full scan).
    func scanOne(_ path: String, known source: some KnownEntrySource) throws {
        startKnown(source.knownEntries(under: path))
        movedFile = source.movedFile
        defer { known = nil; peeked = nil; lastKnownPath = nil }
        let parts = path.split(separator: "/").map(String.init)
        guard (try? SafePath(path)) != nil else {
            problem(path, "not a path that can be synced")
            try skipKnown(under: path)
            return
        }
        // Open the parent one component at a time, never following a link.
        var fd = dup(rootFd)
        var components: [[UInt8]] = []
        for part in parts.dropLast() {
            let bytes = Array(part.utf8)
            if scanner.ignores.ignoresEntry(parent: components, name: bytes, isDirectory: true) {
                Glibc.close(fd)
                try skipKnown(under: path)
                return
            }
            let sub = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let code = errno
            Glibc.close(fd)
            guard sub >= 0 else {
                if code == ENOENT || code == ENOTDIR || code == ELOOP {
                    try drainKnown(before: nil)   // the path is gone: everything known there is deleted
                } else {
                    problem(path, FileError.system("open directory", path: part, errno: code).message)
                    try skipKnown(under: path)
                }
                return
            }
            fd = sub
            components.append(bytes)
        }
        let name = parts.last!
        let frame = WalkFrame(fd: fd, path: parts.dropLast().joined(separator: "/"), components: components, items: [])
        guard let item = statItem(fd, name: name, nameBytes: Array(name.utf8), parent: components) else {
            Glibc.close(fd)
            try drainKnown(before: nil)
            return
        }
        if scanner.ignores.ignoresEntry(parent: components, name: Array(name.utf8), isDirectory: item.kind == .directory) {
            Glibc.close(fd)
            summary.ignored += 1
            try skipKnown(under: path)
            return
        }
        frame.items = [item]
        if item.kind == .directory {
            var descend = item
            descend.descend = true
            frame.items.append(descend)
        }
        stack.append(frame)
        try walk()
        try drainKnown(before: nil)
    }

    func finish() throws {
        if !batch.isEmpty { try flush() }
        try checkRoot()
    }

    // MARK: Walk

    /// Processes the frames on the stack until it is empty.
    func walk() throws {
        while let frame = stack.last {
            guard frame.next < frame.items.count else {
                Glibc.close(frame.fd)
                stack.removeLast()
                continue
            }
            let item = frame.items[frame.next]
            frame.next += 1
            let path = frame.child(item.name)
            if item.descend {
                try enter(frame, item, path: path)
            } else {
                try visit(frame, item, path: path)
            }
        }
    }

    func enter(_ frame: WalkFrame, _ item: WalkItem, path: String) throws {
        let fd = openat(frame.fd, item.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        var components = frame.components
        components.append(Array(item.name.utf8))
        if fd >= 0, let items = list(fd, path: path, components: components) {
            stack.append(WalkFrame(fd: fd, path: path, components: components, items: items))
            return
        }
        let code = errno
        if fd >= 0 { Glibc.close(fd) }
        if code == ENOENT || code == ENOTDIR || code == ELOOP {
            return   // replaced since it was listed: what is known below it is reported by the merge
        }
        // Unreadable: what the caller knows below it stays as it is.
        problem(path, FileError.system("open directory", path: path, errno: code).message)
        try drainKnown(before: path + "/")
        try skipKnown(under: path + "/", inclusive: false)
    }

    func visit(_ frame: WalkFrame, _ item: WalkItem, path: String) throws {
        try drainKnown(before: path)
        var previous: ScannedEntry?
        if let k = try peekKnown(), utf8Equal(k.path, path) {
            previous = k
            peeked = nil
        }
        var entry = ScannedEntry(path: path, kind: item.kind, size: Int64(item.size), mtimeNs: item.mtimeNs,
                                 mode: item.mode, inode: item.inode)
        switch item.kind {
        case .directory:
            summary.directories += 1
            if let previous, previous.kind == .directory, previous.mode == entry.mode { return }
        case .symlink:
            summary.symlinks += 1
            // Unreadable (a problem is reported) or vanished: what is known stays as it is.
            guard let target = readLink(frame.fd, item.name, path: path) else { return try flushIfFull() }
            entry.symlinkTarget = target
            if let previous, previous.kind == .symlink, previous.symlinkTarget == target { return }
        case .file:
            summary.files += 1
            if let previous, previous.kind == .file, let manifest = previous.manifest,
               previous.size == entry.size, previous.mtimeNs == entry.mtimeNs, previous.inode == entry.inode {
                if previous.mode == entry.mode { return }
                entry.manifest = manifest   // metadata only: the content is not read
            } else if let moved = movedFile?(path, entry.inode, entry.size, entry.mtimeNs), let manifest = moved.manifest {
                entry.manifest = manifest   // renamed or moved here: the content is not read
                summary.moved += 1
            } else {
                switch hash(frame.fd, item.name, path: path, previous: previous?.manifest) {
                case .hashed(let fresh):
                    entry = fresh
                case .unstable:
                    batch.unstable.append(path)
                    summary.unstable += 1
                    return try flushIfFull()
                case .gone:
                    if previous != nil { try reportDeleted(path) }
                    return
                case .failed(let message):
                    problem(path, message)
                    return try flushIfFull()
                }
            }
        }
        batchChunks += entry.manifest?.chunks.count ?? 0
        if previous == nil {
            batch.added.append(entry)
            summary.added += 1
        } else {
            batch.changed.append(entry)
            summary.changed += 1
        }
        try flushIfFull()
    }

    // MARK: Listing

    /// The entries of the directory `fd` (not consumed), sorted for the walk, without
    /// ignored entries and kinds that are not synced; nil if it cannot be read.
    func list(_ fd: Int32, path: String, components: [[UInt8]]) -> [WalkItem]? {
        let copy = dup(fd)
        guard copy >= 0 else { return nil }
        guard let stream = fdopendir(copy) else {
            let code = errno
            Glibc.close(copy)
            errno = code
            return nil
        }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { return nil }
                break
            }
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw -> [UInt8] in
                let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
                return Array(UnsafeBufferPointer(start: base, count: strnlen(raw.baseAddress!.assumingMemoryBound(to: CChar.self), raw.count)))
            }
            if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }
            names.append(bytes)
        }
        var items: [WalkItem] = []
        items.reserveCapacity(names.count + names.count / 8)
        var kept: [String] = []
        for nameBytes in names {
            if SafePath.firstInvalidUTF8(nameBytes) != nil {
                let shown = String(decoding: nameBytes, as: UTF8.self)
                problem(path.isEmpty ? shown : path + "/" + shown, "the name is not valid UTF-8; it is not synced")
                continue
            }
            let name = String(decoding: nameBytes, as: UTF8.self)
            guard let item = statItem(fd, name: name, nameBytes: nameBytes, parent: components) else { continue }
            if scanner.ignores.ignoresEntry(parent: components, name: nameBytes, isDirectory: item.kind == .directory) {
                summary.ignored += 1
                continue
            }
            if let error = nameProblem(name, path: path) {
                problem(path.isEmpty ? name : path + "/" + name, error)
                continue
            }
            items.append(item)
            kept.append(name)
            if item.kind == .directory {
                var descend = item
                descend.descend = true
                descend.key.append(UInt8(ascii: "/"))
                items.append(descend)
            }
        }
        items.sort { bytesLess($0.key, $1.key) }
        noteTwins(NormalizationTwins.find(kept), in: path)
        return items
    }

    /// What `name` in `fd` is (not following a link); nil if it vanished or is not a kind
    /// that is synced.
    func statItem(_ fd: Int32, name: String, nameBytes: [UInt8], parent: [[UInt8]]) -> WalkItem? {
        var st = stat()
        guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        let kind: FileKind
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        default: return nil
        }
        return WalkItem(name: name, key: nameBytes, descend: false, kind: kind,
                        size: kind == .directory ? 0 : UInt64(st.st_size), mtimeNs: Self.mtimeNs(st),
                        mode: UInt32(st.st_mode) & 0o7777, inode: UInt64(st.st_ino))
    }

    /// Why `name` cannot be synced (peers refuse it), or nil.
    func nameProblem(_ name: String, path: String) -> String? {
        do {
            _ = try SafePath.validateName(name)
        } catch {
            return error.description + "; it is not synced"
        }
        if path.utf8.count + 1 + name.utf8.count > SafePath.maxPathBytes {
            return "the path is longer than \(SafePath.maxPathBytes) bytes; it is not synced"
        }
        return nil
    }

    static func mtimeNs(_ st: stat) -> Int64 {
        Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
    }

    func readLink(_ fd: Int32, _ name: String, path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = buffer.withUnsafeMutableBytes { readlinkat(fd, name, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        guard n >= 0 else {
            if errno != ENOENT && errno != EINVAL { problem(path, FileError.system("readlink", path: path, errno: errno).message) }
            return nil
        }
        let bytes = Array(buffer[0..<n])
        guard SafePath.firstInvalidUTF8(bytes) == nil else {
            problem(path, "the link's target is not valid UTF-8; it is not synced")
            return nil
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Hashing

    enum HashResult {
        case hashed(ScannedEntry)
        case unstable
        case gone
        case failed(String)
    }

    /// Reads and chunks the file `name` in `fd`; the entry's metadata comes from the
    /// open descriptor (what was actually read). A large file whose `previous` manifest has
    /// its quick sums in `chunkSums` is re-chunked from it (`DeltaChunker`).
    func hash(_ dirFd: Int32, _ name: String, path: String, previous: Manifest? = nil) -> HashResult {
        let fd = openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return .gone }
            if code == ELOOP { return .unstable }   // replaced by a link since it was listed
            return .failed(FileError.system("open", path: path, errno: code).message)
        }
        defer { Glibc.close(fd) }
        var before = stat()
        guard fstat(fd, &before) == 0 else {
            return .failed(FileError.system("fstat", path: path, errno: errno).message)
        }
        guard before.st_mode & S_IFMT == S_IFREG else { return .unstable }
        let size = UInt64(before.st_size)
        let sumCache = size >= ChunkSumCache.minimumFileSize ? scanner.chunkSums : nil
        summary.filesHashed += 1
        let chunks: [ChunkRef]
        let sums: [QuickSum]
        do {
            (chunks, sums) = try chunk(fd, path: path, size: size, previous: previous, sumCache: sumCache)
        } catch {
            abandonGrowing(path)
            return .failed(error.message)
        }
        scanner.afterReadHook?(path)
        var after = stat()
        guard fstat(fd, &after) == 0, after.st_size == before.st_size, Self.mtimeNs(after) == Self.mtimeNs(before),
              (chunks.last?.end ?? 0) == size,
              let manifest = try? Manifest(fileSize: size, chunks: chunks) else {
            abandonGrowing(path)
            return .unstable
        }
        growingScan = nil
        sumCache?.record(ChunkSums(rootHash: manifest.rootHash, sums: sums), for: path)
        return .hashed(ScannedEntry(path: path, kind: .file, size: Int64(size), mtimeNs: Self.mtimeNs(before),
                                    mode: UInt32(before.st_mode) & 0o7777, inode: UInt64(before.st_ino),
                                    manifest: manifest))
    }

    /// The chunks of the open file (and their quick sums when `sumCache` is set): from the
    /// `previous` manifest when the cache has its sums, else by reading it whole.
    private func chunk(_ fd: Int32, path: String, size: UInt64, previous: Manifest?,
                       sumCache: ChunkSumCache?) throws(FileError) -> ([ChunkRef], [QuickSum]) {
        if let sumCache, let previous, let old = sumCache.sums(for: path, rootHash: previous.rootHash) {
            let delta = try DeltaChunker.rechunk(fileDescriptor: fd, path: path, size: size, previous: previous, sums: old,
                                                 threads: scanner.hashThreads)
            if let delta {
                summary.bytesRead += delta.bytesRead
                return (delta.chunks, delta.sums)
            }
        }
        let chunker = FileChunker(fileDescriptor: fd, path: path, parameters: ChunkParameters.forFileSize(size),
                                  readBlockSize: FolderScanner.readBlockSize(for: size),
                                  hashThreads: size >= 4 << 20 ? scanner.hashThreads : 1, quickSums: sumCache != nil,
                                  buffers: buffers, maps: false)
        defer { summary.bytesRead += chunker.bytesChunked }
        guard size >= scanner.growingFrom, let tell = scanner.onGrowing else { return (try chunker.allChunks(), chunker.sums) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return (try chunker.allChunks(), chunker.sums) }
        let stamp = GrowingFileEvent.Stamp(size: size, mtimeNs: Self.mtimeNs(st), inode: UInt64(st.st_ino))
        return (try chunkTelling(chunker, path: path, stamp: stamp, tell), chunker.sums)
    }

    // MARK: Growing files

    /// The hashing of a large file that peers were told of (`onGrowing`), until it ends.
    var growingScan: UInt64?

    /// All chunks of `chunker`, told in batches as they are cut.
    private func chunkTelling(_ chunker: FileChunker, path: String, stamp: GrowingFileEvent.Stamp,
                              _ tell: @Sendable (GrowingFileEvent) -> Void) throws(FileError) -> [ChunkRef] {
        let scan = UInt64.random(in: 1...UInt64.max)
        growingScan = scan
        var out: [ChunkRef] = []
        var told = 0
        var bytes: UInt64 = 0
        while let chunk = try chunker.next() {
            out.append(chunk)
            bytes += UInt64(chunk.size)
            if bytes >= GrowingFileEvent.batchBytes || out.count - told >= GrowingFileEvent.batchChunks {
                tell(.chunks(path: path, scan: scan, stamp: stamp, chunks: Array(out[told...])))
                told = out.count
                bytes = 0
            }
        }
        if told < out.count { tell(.chunks(path: path, scan: scan, stamp: stamp, chunks: Array(out[told...]))) }
        return out
    }

    /// The large file being hashed ends without an entry: peers told of it are told it is void.
    func abandonGrowing(_ path: String) {
        guard let scan = growingScan else { return }
        growingScan = nil
        scanner.onGrowing?(.abandoned(path: path, scan: scan))
    }

    // MARK: Known entries

    /// The source's `movedFile`, for files the known entries do not match.
    var movedFile: ((String, UInt64, Int64, Int64) -> ScannedEntry?)?

    func startKnown(_ iterator: any IteratorProtocol<ScannedEntry>) {
        known = iterator
        peeked = nil
        lastKnownPath = nil
    }

    func peekKnown() throws -> ScannedEntry? {
        if let peeked { return peeked }
        guard var iterator = known else { return nil }
        let next = iterator.next()
        known = iterator
        if let next {
            if let last = lastKnownPath, !utf8Less(last, next.path) {
                throw ScanError.knownEntriesOutOfOrder(previous: last, next: next.path)
            }
            lastKnownPath = next.path
        }
        peeked = next
        return next
    }

    /// Known entries before `path` (all of them for nil) were not found: deleted, unless
    /// they are ignored now.
    func drainKnown(before path: String?) throws {
        while let k = try peekKnown(), path.map({ utf8Less(k.path, $0) }) ?? true {
            peeked = nil
            if scanner.ignores.isIgnored(k.path, isDirectory: k.kind == .directory) { continue }
            try reportDeleted(k.path)
        }
    }

    /// Consumes, without reporting, the known entries at `prefix` and below it (or only
    /// those starting with `prefix` when not `inclusive`).
    func skipKnown(under prefix: String, inclusive: Bool = true) throws {
        while let k = try peekKnown(), (inclusive && utf8Equal(k.path, prefix)) || utf8HasPrefix(k.path, inclusive ? prefix + "/" : prefix) {
            peeked = nil
        }
    }

    // MARK: Batches

    func reportDeleted(_ path: String) throws {
        batch.deleted.append(path)
        summary.deleted += 1
        try flushIfFull()
    }

    /// Counts names of the directory at `directory` that collide under Unicode normalization.
    func noteTwins(_ names: [String], in directory: String) {
        guard !names.isEmpty else { return }
        summary.normalizationTwins[PathKey(directory)] = names.count
        for name in names.prefix(NormalizationTwins.examplesKept - summary.normalizationTwinNames.count) {
            summary.normalizationTwinNames.append(directory.isEmpty ? name : directory + "/" + name)
        }
    }

    func problem(_ path: String, _ message: String) {
        batch.problems.append(ScanProblem(path: path, message: message))
        summary.problems += 1
    }

    func flushIfFull() throws {
        if batch.count >= batchLimit || batchChunks >= scanner.maxBatchChunks { try flush() }
    }

    func flush() throws {
        if !batch.deleted.isEmpty { try checkRoot() }
        let full = batch
        batch = ScanBatch()
        batchChunks = 0
        batchLimit = min(scanner.maxBatchSize, 2 * batchLimit)
        summary.batches += 1
        try onBatch(full)
    }
}
