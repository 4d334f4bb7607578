internal import Glibc

/// A file open for plain reads and writes by its descriptor: what Foundation's `FileHandle`
/// did for the CLI's configuration file and the wormhole's zips (issue 42.6: FileHandle is
/// not in FoundationEssentials). Closed by `close()` or with the last reference.
package final class PlainFile {
    package let fileDescriptor: Int32
    /// The path, for messages.
    package let path: String
    private var open = true

    private init(fd: Int32, path: String) {
        fileDescriptor = fd
        self.path = path
    }

    deinit { close() }

    /// An existing file for reading; nil when it cannot be opened.
    package static func reading(_ path: String) -> PlainFile? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        return fd < 0 ? nil : PlainFile(fd: fd, path: path)
    }

    /// A new or emptied file for writing (mode 0666 less the umask); nil when it cannot be made.
    package static func writing(_ path: String) -> PlainFile? {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        return fd < 0 ? nil : PlainFile(fd: fd, path: path)
    }

    package func close() {
        if open { _ = Glibc.close(fileDescriptor) }
        open = false
    }

    /// The next bytes, at most `count`: fewer only at the end of the file.
    package func read(upToCount count: Int) throws(FileError) -> [UInt8] {
        try fill(count) { base, wanted, _ in Glibc.read(fileDescriptor, base, wanted) }
    }

    /// The bytes at `offset`, at most `count`: fewer only at the end of the file.
    package func read(at offset: UInt64, upToCount count: Int) throws(FileError) -> [UInt8] {
        try fill(count) { base, wanted, filled in pread(fileDescriptor, base, wanted, off_t(offset) + off_t(filled)) }
    }

    /// The file's size now.
    package func size() throws(FileError) -> UInt64 {
        var info = stat()
        guard fstat(fileDescriptor, &info) == 0 else { throw FileError.system("stat", path: path, errno: errno) }
        return UInt64(info.st_size)
    }

    /// Writes all of `bytes` at the current offset.
    package func write(_ bytes: [UInt8]) throws(FileError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fileDescriptor, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError.system("write", path: path, errno: errno)
            }
            done += n
        }
    }

    private func fill(_ count: Int, _ readInto: (UnsafeMutableRawPointer, Int, Int) -> Int) throws(FileError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(count, 0))
        var filled = 0
        while filled < bytes.count {
            let count = bytes.count
            let n = bytes.withUnsafeMutableBytes { readInto($0.baseAddress! + filled, count - filled, filled) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError.system("read", path: path, errno: errno)
            }
            if n == 0 { break }
            filled += n
        }
        bytes.removeLast(bytes.count - filled)
        return bytes
    }
}
