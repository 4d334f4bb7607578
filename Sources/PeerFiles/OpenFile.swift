internal import Glibc

/// A file open for reading, shared by whoever holds it: its descriptor is closed when the
/// last reference goes (if it owns it). Immutable, so any thread may read through it at
/// once (`pread` keeps no offset): a `ChunkReader` reads through one, and a chunk's bytes
/// are streamed through it from another queue while the reader goes on.
package final class OpenFile: Sendable {
    package let fd: Int32
    /// The path, for messages.
    package let path: String
    private let ownsDescriptor: Bool

    /// Takes an open descriptor (closed with the last reference only if `ownsDescriptor`).
    package init(fd: Int32, path: String, ownsDescriptor: Bool) {
        self.fd = fd
        self.path = path
        self.ownsDescriptor = ownsDescriptor
    }

    deinit {
        if ownsDescriptor { close(fd) }
    }

    /// Fills `buffer` with the bytes at `offset` straight from the file. A file that ends
    /// earlier throws `FileError.changedOnDisk`.
    package func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(FileError) {
        guard let base = buffer.baseAddress else { return }
        var done = 0
        while done < buffer.count {
            let n = pread(fd, base + done, buffer.count - done, off_t(offset + UInt64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError.system("read", path: path, errno: errno)
            }
            if n == 0 {
                throw FileError(kind: .changedOnDisk, operation: "read", path: path,
                                message: "the file ends at \(offset + UInt64(done)), before \(offset + UInt64(buffer.count)); it changed since it was scanned")
            }
            done += n
        }
    }
}
