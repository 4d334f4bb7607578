internal import Glibc

/// A point in time with nanoseconds, as stored in a file's mtime.
package struct FileTimestamp: Sendable, Hashable, CustomStringConvertible {
    package var seconds: Int64
    /// 0 … 999,999,999.
    package var nanoseconds: Int32

    package init(seconds: Int64, nanoseconds: Int32) {
        precondition((0..<1_000_000_000).contains(nanoseconds), "FileTimestamp: nanoseconds must be 0...999,999,999")
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// From nanoseconds since the epoch (the `mtime_ns` of the index).
    package init(nanosecondsSinceEpoch ns: Int64) {
        var s = ns / 1_000_000_000
        var n = ns % 1_000_000_000
        if n < 0 { s -= 1; n += 1_000_000_000 }
        self.init(seconds: s, nanoseconds: Int32(n))
    }

    package var nanosecondsSinceEpoch: Int64 { seconds * 1_000_000_000 + Int64(nanoseconds) }

    package var description: String {
        let ns = String(nanoseconds)
        return "\(seconds).\(String(repeating: "0", count: 9 - ns.count))\(ns)"
    }
}

/// What `PartialFile.commit` does when the final name is taken.
package enum NameConflictPolicy: Sendable, Equatable {
    /// Throw `.alreadyExists`; the partial file stays.
    case fail
    /// Use `name (1).ext`, `name (2).ext`, … (`SafePath.uniqueName`), retrying if another
    /// process takes the name in between.
    case pickUniqueName
}

/// A file being received: `<directory>/.syncpeer-partial/<transferID>.part` (the staging
/// directory is mode 0700, the file 0600). Chunks are written at their offsets in any
/// order; `commit` makes it the final file atomically and durably, never replacing an
/// existing file. The partial file survives crashes and errors (disk full included) so
/// that a transfer can resume; only `remove()` and `commit` take it away.
///
/// Not thread-safe: one writer per partial file. (@unchecked Sendable: a thin wrapper of a
/// descriptor, handed between threads but used by one at a time, e.g. a transfer's `io` queue.)
package final class PartialFile: @unchecked Sendable {
    package static let stagingDirectoryName = ".syncpeer-partial"
    package static let fileExtension = ".part"

    package let transferID: String
    /// Where the final file goes.
    package let directory: DirectoryHandle
    /// `<directory>/.syncpeer-partial`.
    package let staging: DirectoryHandle
    /// `<transferID>.part`.
    package var fileName: String { transferID + Self.fileExtension }
    /// For messages.
    package var path: String { staging.path + "/" + fileName }

    private var fd: Int32
    /// Bytes written since the last release of written pages (see `releaseWrittenPages`).
    private var writtenSinceRelease = 0
    /// One past the highest byte written, and where the releases of the last two rounds
    /// started from.
    private var highWater: UInt64 = 0
    private var releaseMarks: (UInt64, UInt64) = (0, 0)

    /// After this many bytes written, the partial file starts their writeback and drops the
    /// pages already on disk from the page cache (`releaseWrittenPages`).
    package static let pageReleaseInterval = 32 << 20

    /// Opens the partial file of `transferID` in `directory`, creating it (empty) and the
    /// staging directory if needed. An existing partial file is kept as it is (resume).
    ///
    /// `transferID` becomes a file name: 1–128 characters of `A–Z a–z 0–9 - _ .`, not
    /// starting with "." (anything else is refused with `.invalidArgument`).
    package init(transferID: String, in directory: DirectoryHandle) throws(FileError) {
        try Self.validate(transferID: transferID)
        self.transferID = transferID
        self.directory = directory
        if mkdirat(directory.fd, Self.stagingDirectoryName, 0o700) == 0 {
            try directory.sync()   // the partial files in it must outlast a power cut (resume)
        } else if errno != EEXIST {
            throw FileError.system("create staging directory", path: directory.path + "/" + Self.stagingDirectoryName, errno: errno)
        }
        staging = try directory.openSubdirectory(Self.stagingDirectoryName)
        let name = transferID + Self.fileExtension
        fd = openat(staging.fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileError.system("open partial file", path: staging.path + "/" + name, errno: errno) }
        // Its name must last as long as the chunks recorded as verified in it (resume).
        guard fsync(staging.fd) == 0 else { throw FileError.system("fsync directory", path: staging.path, errno: errno) }
    }

    /// Opens an existing partial file, or returns nil if there is none.
    package static func existing(transferID: String, in directory: DirectoryHandle) throws(FileError) -> PartialFile? {
        try validate(transferID: transferID)
        guard directory.entryKind(stagingDirectoryName) == .directory else { return nil }
        let staging = try directory.openSubdirectory(stagingDirectoryName)
        guard staging.entryKind(transferID + fileExtension) == .file else { return nil }
        return try PartialFile(transferID: transferID, in: directory)
    }

    deinit { if fd >= 0 { close(fd) } }

    static func validate(transferID: String) throws(FileError) {
        let allowed = transferID.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".")
        }
        guard allowed, (1...128).contains(transferID.utf8.count), !transferID.hasPrefix(".") else {
            throw FileError(kind: .invalidArgument, operation: "open partial file", path: "",
                            message: "transfer ID \"\(transferID)\" is not 1-128 characters of A-Z a-z 0-9 - _ . (not starting with \".\")")
        }
    }

    private func openDescriptor(_ operation: String) throws(FileError) -> Int32 {
        guard fd >= 0 else {
            throw FileError(kind: .invalidArgument, operation: operation, path: path,
                            message: "the partial file was already committed or removed")
        }
        return fd
    }

    /// Current length of the partial file.
    package func size() throws(FileError) -> UInt64 {
        var st = stat()
        guard fstat(try openDescriptor("fstat"), &st) == 0 else { throw FileError.system("fstat", path: path, errno: errno) }
        return UInt64(st.st_size)
    }

    /// Writes `bytes` at `offset` (`pwrite`, retried until complete). `ENOSPC`/`EDQUOT`
    /// throw `.diskFull`; what was written before stays.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileError) {
        let fd = try openDescriptor("write")
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + UInt64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError.system("write", path: path, errno: errno)
            }
            done += n
        }
        highWater = max(highWater, offset + UInt64(bytes.count))
        writtenSinceRelease += bytes.count
        if writtenSinceRelease >= Self.pageReleaseInterval { releaseWrittenPages(fd) }
    }

    /// Starts the writeback of what was written and drops from the page cache the pages
    /// of earlier rounds that are on disk by now (`POSIX_FADV_DONTNEED` does both and does
    /// not wait). A large received file then occupies a few rounds' worth of page cache
    /// instead of its whole size, the freed pages are reused at once for the next writes
    /// (on a VM that hands free memory back to the host, fresh pages cost ~1.5 s of
    /// system time per GiB written; recycled ones ~0.2 s), and the final `fsync` has
    /// little left to do. Advice only: errors are ignored, the data is written either way.
    private func releaseWrittenPages(_ fd: Int32) {
        let start = releaseMarks.0
        if highWater > start { _ = posix_fadvise(fd, off_t(start), off_t(highWater - start), POSIX_FADV_DONTNEED) }
        releaseMarks = (releaseMarks.1, highWater)
        writtenSinceRelease = 0
    }

    package func write(_ bytes: [UInt8], at offset: UInt64) throws(FileError) {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(FileError) in try write(raw, at: offset) } }
        try result.get()
    }

    /// Whether `bytes` hash to `expected` (BLAKE3, `ChunkHash.of`).
    package static func verify(_ bytes: UnsafeRawBufferPointer, expected: ChunkHash) -> Bool {
        ChunkHash.of(bytes) == expected
    }

    package static func verify(_ bytes: [UInt8], expected: ChunkHash) -> Bool {
        ChunkHash.of(bytes) == expected
    }

    /// Verifies `bytes` against `chunk` (size and hash), then writes them at its offset.
    /// A mismatch throws `.hashMismatch` and writes nothing.
    package func writeChunk(_ bytes: UnsafeRawBufferPointer, as chunk: ChunkRef) throws(FileError) {
        guard bytes.count == Int(chunk.size) else {
            throw FileError(kind: .hashMismatch, operation: "verify chunk", path: path,
                            message: "chunk at offset \(chunk.offset) has \(bytes.count) bytes, expected \(chunk.size)")
        }
        guard Self.verify(bytes, expected: chunk.hash) else {
            throw FileError(kind: .hashMismatch, operation: "verify chunk", path: path,
                            message: "chunk at offset \(chunk.offset) does not match its hash \(chunk.hash)")
        }
        try write(bytes, at: chunk.offset)
    }

    package func writeChunk(_ bytes: [UInt8], as chunk: ChunkRef) throws(FileError) {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(FileError) in try writeChunk(raw, as: chunk) } }
        try result.get()
    }

    /// Allocates `size` bytes on disk up front (`posix_fallocate`), so that a full disk
    /// shows at the start of a transfer rather than in the middle. Optional.
    package func reserve(_ size: UInt64) throws(FileError) {
        guard size > 0 else { return }
        let code = posix_fallocate(try openDescriptor("reserve"), 0, off_t(size))
        guard code == 0 else { throw FileError.system("reserve space", path: path, errno: code) }
    }

    /// Sets the length (drops bytes beyond it, or extends with a hole).
    package func truncate(to size: UInt64) throws(FileError) {
        guard ftruncate(try openDescriptor("truncate"), off_t(size)) == 0 else {
            throw FileError.system("truncate", path: path, errno: errno)
        }
    }

    /// fsync: the data written so far is on disk.
    package func sync() throws(FileError) {
        guard fsync(try openDescriptor("fsync")) == 0 else { throw FileError.system("fsync", path: path, errno: errno) }
    }

    /// Indices of the chunks of `manifest` whose bytes in the partial file already match
    /// their hash. Each chunk's range is read and re-hashed (on all cores), except the chunks
    /// in `trusted`: those this process verified as they arrived, taken as held without
    /// reading them. The file is the truth for everything else: chunks written just before a
    /// crash, and chunks recorded as verified before a restart (a record is no proof that
    /// the bytes are still intact).
    /// Chunks beyond the end of the file are missing, trusted or not (a partial file that
    /// was lost or cut short holds nothing there).
    package func verifiedChunks(of manifest: Manifest, trusting trusted: Set<Int> = []) throws(FileError) -> [Int] {
        let fileSize = try size()
        let candidates = manifest.chunks.indices.filter { manifest.chunks[$0].end <= fileSize }
        let toHash = candidates.filter { !trusted.contains($0) }
        guard !toHash.isEmpty else { return candidates }
        let fd = try openDescriptor("verify")
        let bad = Set(ChunkReader.mismatches(toHash.map {
            ChunkReader.Check(fd: fd, offset: manifest.chunks[$0].offset, size: manifest.chunks[$0].size, hash: manifest.chunks[$0].hash)
        }).map { toHash[$0] })
        return candidates.filter { !bad.contains($0) }
    }

    /// A second descriptor of this partial file, to make what was written so far durable
    /// from another thread while this one goes on writing (see `DataSync`).
    package func dataSync() throws(FileError) -> DataSync {
        let copy = dup(try openDescriptor("open for sync"))
        guard copy >= 0 else { throw FileError.system("dup", path: path, errno: errno) }
        return DataSync(fd: copy, path: path)
    }

    /// Makes the partial file the final file `name` in `directory`:
    /// 1. truncates it to `size` when given (exactly the manifest's file size);
    /// 2. sets the permission bits `mode & 0o777` (setuid, setgid and sticky bits from a
    ///    peer are dropped) and the mtime with nanoseconds (`futimens`; atime = now);
    /// 3. fsyncs the file;
    /// 4. renames it into place without ever replacing an existing entry
    ///    (`renameat2(RENAME_NOREPLACE)`, or `link` + `unlink` where that is unavailable);
    /// 5. fsyncs the directory, and the staging directory (the partial's name is gone from it
    ///    durably: otherwise a power cut can bring the name back beside the final file, the
    ///    rename being a change in each directory).
    /// Returns the name used (different from `name` only with `.pickUniqueName`).
    /// After a successful commit the object is closed; on failure the partial file stays.
    @discardableResult
    package func commit(as name: String, mode: UInt32, modificationTime: FileTimestamp, size: UInt64? = nil,
                       onConflict: NameConflictPolicy = .fail) throws(FileError) -> String {
        do {
            _ = try SafePath.validateName(name)
        } catch {
            throw FileError(kind: .invalidArgument, operation: "commit", path: directory.path, message: error.description)
        }
        let fd = try openDescriptor("commit")
        if let size { try truncate(to: size) }
        guard fchmod(fd, mode_t(mode & 0o777)) == 0 else { throw FileError.system("chmod", path: path, errno: errno) }
        var times = [timespec(tv_sec: 0, tv_nsec: Self.utimeNow),
                     timespec(tv_sec: Int(modificationTime.seconds), tv_nsec: Int(modificationTime.nanoseconds))]
        guard futimens(fd, &times) == 0 else { throw FileError.system("set mtime", path: path, errno: errno) }
        try sync()

        var finalName = name
        while true {
            do {
                try Self.renameNoReplace(from: staging, fileName, to: directory, finalName)
                break
            } catch where error.kind == .alreadyExists && onConflict == .pickUniqueName {
                finalName = directory.uniqueName(for: name)
            }
        }
        close(fd)
        self.fd = -1
        try directory.sync()
        fsync(staging.fd)   // committed already: a failure here costs at most a leftover name
        return finalName
    }

    /// Deletes the partial file (a cancelled transfer). The staging directory stays.
    package func remove() throws(FileError) {
        if fd >= 0 { close(fd); fd = -1 }
        if unlinkat(staging.fd, fileName, 0) != 0 && errno != ENOENT {
            throw FileError.system("remove partial file", path: path, errno: errno)
        }
    }

    /// UTIME_NOW from <sys/stat.h> (not imported into Swift).
    static let utimeNow = (1 << 30) - 1

    /// Renames `from/name` to `to/newName` unless `newName` exists (then `.alreadyExists`).
    /// `useRenameat2: false` forces the link + unlink path (for tests).
    static func renameNoReplace(from: DirectoryHandle, _ name: String, to: DirectoryHandle, _ newName: String,
                                useRenameat2: Bool = true) throws(FileError) {
        let target = to.path + "/" + newName
        if useRenameat2, let renameat2 = Self.renameat2 {
            if renameat2(from.fd, name, to.fd, newName, 1 /* RENAME_NOREPLACE */) == 0 { return }
            let code = errno
            guard DirectoryHandle.flagsUnsupported(code) else { throw FileError.system("rename", path: target, errno: code) }
        }
        // link() never replaces an existing entry: it fails with EEXIST.
        guard linkat(from.fd, name, to.fd, newName, 0) == 0 else { throw FileError.system("link", path: target, errno: errno) }
        guard unlinkat(from.fd, name, 0) == 0 else {
            throw FileError.system("unlink partial file", path: from.path + "/" + name, errno: errno)
        }
    }

    /// renameat2, when the C library has it (for directory moves).
    static var renameat2Function: RenameAt2? { renameat2 }

    typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32

    /// glibc's renameat2 (2.28+), looked up at run time: Swift does not import it.
    private static let renameat2: RenameAt2? = {
        guard let symbol = dlsym(nil, "renameat2") else { return nil }
        return unsafeBitCast(symbol, to: RenameAt2.self)
    }()
}

/// Makes the bytes written to a partial file durable (`fdatasync`, or `syncfs` for many
/// files at once) through its own descriptor, so that it can run off the writer's thread:
/// every write that returned before `sync` was called is on disk when it returns. A
/// receiver records a chunk as verified only after this, so a chunk the index calls
/// verified survives a power loss as well as a crash, and a resume may trust it without
/// reading it again.
package final class DataSync: @unchecked Sendable {
    // @unchecked: `fd` is immutable and only passed to thread-safe system calls.
    private let fd: Int32
    package let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// Whether `sync(fileSystem: true)` makes every file of the file system durable (not on
    /// FUSE: `DurableNames.syncfsIsBarrier`).
    package var syncfsIsBarrier: Bool { DurableNames.syncfsIsBarrier(fd) }

    /// `fdatasync` of this file, or `syncfs` of its whole file system when `fileSystem`
    /// (one call for a batch that touched many files).
    package func sync(fileSystem: Bool = false) throws(FileError) {
        while true {
            if (fileSystem ? partialSyncFileSystem(fd) : fdatasync(fd)) == 0 { return }
            if errno == EINTR { continue }
            throw FileError.system(fileSystem ? "syncfs" : "fdatasync", path: path, errno: errno)
        }
    }
}

/// syncfs(2), which the Glibc module does not export.
@_silgen_name("syncfs") private func partialSyncFileSystem(_ fd: Int32) -> Int32
