internal import Glibc

/// Looks at an index file *before* SQLite touches it, and creates new ones with mode 0600.
///
/// SQLite would report a foreign file only on first read, and it might by then have
/// created `-wal`/`-shm` files next to it. Reading the 100-byte header ourselves lets us
/// refuse random bytes, text files and truncated copies without changing anything on disk.
enum IndexFile {
    enum State: Equatable {
        /// No file: create one.
        case missing
        /// A file with a plausible SQLite header.
        case sqlite
    }

    /// "SQLite format 3\0", the first 16 bytes of every SQLite 3 database.
    static let magic: [UInt8] = Array("SQLite format 3".utf8) + [0]
    static let headerSize = 100

    static func inspect(path: String) throws(IndexError) -> State {
        var info = stat()
        if stat(path, &info) != 0 {
            let code = errno
            if code == ENOENT { return .missing }
            throw ioError(path, "stat", code)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw IndexError(kind: .cannotOpen, operation: "open", path: path,
                             message: "it is not a regular file", hint: "point it at a file, not a directory or device")
        }
        let size = Int64(info.st_size)
        // New indexes appear complete (NodeIndex.createNew): an empty one lost its data.
        guard size > 0 else { throw damaged(path, "file is empty (0 bytes)") }

        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ioError(path, "open", errno) }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: headerSize)
        let count = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, headerSize, 0) }
        guard count >= 0 else { throw ioError(path, "read", errno) }
        header.removeLast(headerSize - count)

        guard count >= magic.count, header.starts(with: magic) else {
            throw notADatabase(path)
        }
        guard count == headerSize else {
            throw damaged(path, "file is truncated: \(size) bytes, shorter than the 100-byte SQLite header")
        }
        let rawPageSize = Int64(header[16]) << 8 | Int64(header[17])
        let pageSize = rawPageSize == 1 ? 65_536 : rawPageSize
        guard pageSize >= 512, pageSize <= 65_536, pageSize & (pageSize - 1) == 0 else {
            throw damaged(path, "invalid page size \(rawPageSize) in the SQLite header")
        }
        // The in-header page count is trustworthy when "version-valid-for" (offset 92)
        // equals the change counter (offset 24). With a non-empty -wal, a crash during a
        // checkpoint can leave the main file short until the WAL is replayed: trust SQLite then.
        let changeCounter = bigEndian32(header, 24)
        let pageCount = bigEndian32(header, 28)
        let validFor = bigEndian32(header, 92)
        if validFor == changeCounter, pageCount > 0, !hasNonEmptyWAL(path) {
            let expected = Int64(pageCount) * pageSize
            if size < expected {
                throw damaged(path, "file is truncated: \(size) of \(expected) bytes")
            }
        }
        return .sqlite
    }

    /// Creates an empty file with mode 0600 (owner read/write only); fine if it appeared meanwhile.
    static func create(path: String) throws(IndexError) {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd < 0 {
            let code = errno
            if code == EEXIST { return }
            throw ioError(path, "create", code)
        }
        close(fd)
    }

    /// Makes the complete file `temporary` appear as `path`: fsynced, hard-linked (which
    /// never replaces a file: if `path` appeared meanwhile, that one stays), directory
    /// fsynced. `temporary` is left for the caller to remove.
    static func publish(_ temporary: String, as path: String) throws(IndexError) {
        let fd = Glibc.open(temporary, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ioError(temporary, "open", errno) }
        let synced = fsync(fd) == 0
        let code = errno
        close(fd)
        guard synced else { throw ioError(temporary, "fsync", code) }
        guard link(temporary, path) == 0 || errno == EEXIST else { throw ioError(path, "link", errno) }
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        let dirFD = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
    }

    /// Removes a file and its rollback journal if they exist (a temporary index).
    static func remove(_ path: String) {
        unlink(path)
        unlink(path + "-journal")
    }

    /// The permission bits of `path` (for tests and diagnostics).
    static func mode(path: String) -> UInt32? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return UInt32(info.st_mode & 0o7777)
    }

    private static func hasNonEmptyWAL(_ path: String) -> Bool {
        var info = stat()
        return stat(path + "-wal", &info) == 0 && info.st_size > 0
    }

    private static func bigEndian32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    static func notADatabase(_ path: String) -> IndexError {
        IndexError(kind: .notADatabase, operation: "open", path: path, message: "file is not a database",
                   hint: "it was left untouched; move it away or choose another home with SYNCPEER_HOME")
    }

    static func damaged(_ path: String, _ message: String) -> IndexError {
        IndexError(kind: .damaged, operation: "open", path: path, message: message,
                   hint: "it was left untouched; restore it from a backup, or move it away to start a new index (peers must pair again)")
    }

    private static func ioError(_ path: String, _ operation: String, _ code: Int32) -> IndexError {
        IndexError(kind: .cannotOpen, operation: operation, path: path,
                   message: "\(operation): \(String(cString: strerror(code)))",
                   hint: "check that the directory exists and that you may read and write it")
    }
}
