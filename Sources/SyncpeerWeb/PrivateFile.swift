internal import Glibc
package import SyncEngine

/// The dashboard's files in the home that only this user may read (its key, the used login
/// codes, the login page): written whole to a private temporary file, synced, then put in
/// place, so none is ever seen half-written or with a wider mode; read only when they are
/// a regular file of this user, mode 0600 (checked on the open descriptor: no race with a
/// swapped path).
enum PrivateFile {
    /// Writes `bytes` to `path`, mode 0600. `replacing`: rename over what is there; else
    /// link into place, keeping a file another process made meanwhile (no error).
    static func write(_ bytes: [UInt8], to path: String, replacing: Bool) throws(EngineError) {
        let temporary = path + ".new-\(getpid())"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .invalidArgument("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        defer { unlink(temporary) }
        guard written == bytes.count, synced else { throw .invalidArgument("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let placed = replacing ? rename(temporary, path) == 0 : (link(temporary, path) == 0 || errno == EEXIST)
        guard placed else { throw .invalidArgument("cannot create \(path): \(String(cString: strerror(errno)))") }
    }

    /// At most `limit` bytes of `path`, or nil when there is no such file.
    static func read(_ path: String, limit: Int) throws(EngineError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw .invalidArgument("cannot open \(path): \(String(cString: strerror(errno))); remove it to make a new one")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid(), info.st_mode & 0o077 == 0 else {
            throw .invalidArgument("\(path) must be a regular file of this user, mode 0600; remove it to make a new one")
        }
        var buffer = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < limit {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, limit - count) }
            guard n > 0 else { break }
            count += n
        }
        return Array(buffer.prefix(count))
    }
}
