internal import Dispatch
internal import FoundationEssentials
internal import Glibc
internal import Synchronization

/// Reads chunks of a file for sending: `pread` at the chunk's offset into one buffer that
/// is reused from chunk to chunk (no allocation per chunk). The bytes are lent to a
/// closure (`withChunk`) and must not escape it. Not thread-safe: one reader per
/// sending task. (@unchecked Sendable: a thin wrapper of a descriptor and its buffer, handed
/// between threads but used by one at a time, e.g. a transfer's `io` queue.)
package final class ChunkReader: @unchecked Sendable {
    /// The path, for messages.
    package let path: String
    /// The open file: what another queue may keep reading once this reader is done.
    package let file: OpenFile
    private var fd: Int32 { file.fd }
    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0
    /// The window `withMappedBytes` read through last (chunks are sent in order, many per window).
    private var window: MappedWindow?

    /// Bytes mapped at a time by `withMappedBytes` (more for a larger chunk): few `mmap`s per
    /// file, and at most this much of it counted in our resident memory at once.
    package static let mappedWindowSize = 4 << 20

    /// Largest read: the largest chunk a manifest may name (16 MiB), which bounds memory.
    package static let maxReadSize = Manifest.maxChunkSize

    /// Reads from an open descriptor (closed with the reader only if `ownsDescriptor`).
    package init(fileDescriptor: Int32, path: String = "", ownsDescriptor: Bool = false) {
        self.path = path
        file = OpenFile(fd: fileDescriptor, path: path, ownsDescriptor: ownsDescriptor)
    }

    /// Opens `path` read-only.
    package convenience init(path: String) throws(FileError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError.system("open", path: path, errno: errno) }
        self.init(fileDescriptor: fd, path: path, ownsDescriptor: true)
    }

    /// Opens `name` in `directory` read-only without following a symbolic link
    /// (`.symlinkRefused` if it is one).
    package convenience init(name: String, in directory: DirectoryHandle) throws(FileError) {
        let path = directory.path + "/" + name
        let fd = openat(directory.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP {
                throw FileError(kind: .symlinkRefused, operation: "open", path: path, errno: code,
                                message: "it is a symbolic link; links inside a synced folder are never followed")
            }
            throw FileError.system("open", path: path, errno: code)
        }
        self.init(fileDescriptor: fd, path: path, ownsDescriptor: true)
    }

    deinit {
        buffer?.deallocate()
    }

    /// Size, mtime (unix ns) and inode of the open file (`fstat`), or nil if that fails:
    /// what an index compares to know that the file still holds what it hashed.
    package func stamp() -> (size: Int64, mtimeNs: Int64, inode: UInt64)? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return (Int64(st.st_size), Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec), UInt64(st.st_ino))
    }

    /// Lends `body` exactly `size` bytes read at `offset`. A file that ends earlier throws
    /// `FileError.changedOnDisk` (it was truncated since it was scanned); `body`'s errors
    /// pass through.
    package func withBytes<R>(at offset: UInt64, size: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try body(read(offset: offset, size: size))
    }

    /// Lends `body` the bytes of `chunk`; with `verify`, checks them against its hash
    /// first (`FileError.changedOnDisk` if they differ: the file changed since it was
    /// chunked).
    package func withChunk<R>(_ chunk: ChunkRef, verify: Bool = false, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try body(read(chunk, verify: verify))
    }

    /// Reads exactly `size` bytes at `offset` into the reused buffer; the result is valid
    /// until the next read and only while the reader lives (hence not public).
    func read(offset: UInt64, size: Int) throws(FileError) -> UnsafeRawBufferPointer {
        guard size >= 0 && size <= Self.maxReadSize else {
            throw FileError(kind: .invalidArgument, operation: "read", path: path,
                            message: "read of \(size) bytes; at most \(Self.maxReadSize) at a time")
        }
        if size > capacity {
            buffer?.deallocate()
            // Grow to the next power of two so that a few sizes do not each reallocate.
            capacity = max(size, 1 << 16).nextPowerOfTwoOrSelf
            buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
        }
        guard size > 0, let buffer else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        try read(at: offset, into: UnsafeMutableRawBufferPointer(start: buffer, count: size))
        return UnsafeRawBufferPointer(start: buffer, count: size)
    }

    /// Lends `body` the `count` bytes at `offset` straight from the page cache (a
    /// `MappedWindow`, kept for the next chunks), without copying them; nil when the file
    /// cannot be mapped there (the caller reads it instead). If the file shrank while `body`
    /// read (it read zeros where the file ended), throws `changedOnDisk` after `body`.
    package func withMappedBytes<R>(at offset: UInt64, count: Int, _ body: (UnsafeRawBufferPointer) -> R) throws(FileError) -> R? {
        guard count > 0 else { return nil }
        if window.map({ !$0.covers(offset: offset, count: count) }) ?? true {
            window = nil
            guard let size = stamp()?.size, UInt64(size) >= offset + UInt64(count) else { return nil }
            let length = Int(min(UInt64(max(Self.mappedWindowSize, count)), UInt64(size) - offset))
            window = MappedWindow.map(fd: fd, offset: offset, count: length)
        }
        guard let window else { return nil }
        let result = body(window.slice(offset: offset, count: count))
        if window.faulted {
            self.window = nil
            throw FileError(kind: .changedOnDisk, operation: "read", path: path,
                            message: "the file ends before \(offset + UInt64(count)); it changed since it was scanned")
        }
        // A window read to its end is let go at once: a reader done with its file (a folder's
        // sent files stay open until the transfer ends) holds no mapping and no slot.
        if offset + UInt64(count) == window.offset + UInt64(window.bytes.count) { self.window = nil }
        return result
    }

    /// Whether a mapped window is held (for tests).
    var holdsWindow: Bool { window != nil }

    /// Fills `buffer` with the bytes at `offset` straight from the file (no buffer of the
    /// reader's own): for streaming a chunk piece by piece. A file that ends earlier throws
    /// `FileError.changedOnDisk`.
    package func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(FileError) {
        try file.read(at: offset, into: buffer)
    }

    /// Fills `buffer` (exactly `chunk.size` bytes) with the bytes of `chunk` read from `file`,
    /// and hashes them there: `FileError.hashMismatch` when they are not the chunk's (the file
    /// changed, or rotted, since it was hashed), `changedOnDisk` when it ends early. What a
    /// peer is sent is then the very bytes that were checked.
    package static func readVerified(_ chunk: ChunkRef, from file: OpenFile, into buffer: UnsafeMutableRawBufferPointer) throws(FileError) {
        guard buffer.count == Int(chunk.size) else {
            throw FileError(kind: .invalidArgument, operation: "read", path: file.path,
                            message: "a buffer of \(buffer.count) bytes for a chunk of \(chunk.size)")
        }
        try file.read(at: chunk.offset, into: buffer)
        guard ChunkHash.of(UnsafeRawBufferPointer(buffer)) == chunk.hash else {
            throw FileError(kind: .hashMismatch, operation: "read", path: file.path,
                            message: "the chunk at offset \(chunk.offset) does not match its hash")
        }
    }

    /// `read(offset:size:)` of a chunk, verified against its hash when asked.
    func read(_ chunk: ChunkRef, verify: Bool = false) throws(FileError) -> UnsafeRawBufferPointer {
        let bytes = try read(offset: chunk.offset, size: Int(chunk.size))
        if verify && ChunkHash.of(bytes) != chunk.hash {
            throw FileError(kind: .changedOnDisk, operation: "read", path: path,
                            message: "chunk at offset \(chunk.offset) no longer matches its hash; the file changed since it was scanned")
        }
        return bytes
    }

    /// The chunks FastCDC cuts in bytes `start ..< end` of the file, with their hashes, where
    /// `start` is a cut point of the whole file (the end of a chunk it had, or 0): the
    /// chunks are those of the whole file as far as the bytes reach. The last one may end
    /// early (at `end`), and so differ. Reads at most 2 × `maxSize` at a time.
    package func cutChunks(from start: UInt64, to end: UInt64, parameters: ChunkParameters) throws(FileError) -> [ChunkRef] {
        var chunks: [ChunkRef] = []
        // (At least `maxSize`, so that every cut but the range's last is the whole file's.)
        let window = max(parameters.maxSize, min(2 * parameters.maxSize, Self.maxReadSize))
        var offset = start
        while offset < end {
            let count = Int(min(UInt64(window), end - offset))
            let bytes = try read(offset: offset, size: count)
            // (A window shorter than `maxSize` is the end of the range: its cut is the end.)
            let cut = Chunker.cutLength(bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count, parameters: parameters)
            chunks.append(ChunkRef(offset: offset, size: UInt32(cut), hash: ChunkHash.of(UnsafeRawBufferPointer(rebasing: bytes[0..<cut]))))
            offset += UInt64(cut)
        }
        return chunks
    }

    /// A copy of the bytes of `chunk` (convenience; the hot path uses `withChunk`).
    package func bytes(of chunk: ChunkRef, verify: Bool = false) throws(FileError) -> [UInt8] {
        Array(try read(chunk, verify: verify))
    }
}

extension Int {
    /// The smallest power of two ≥ self (self ≥ 1).
    var nextPowerOfTwoOrSelf: Int {
        self <= 1 ? 1 : 1 << (Int.bitWidth - (self - 1).leadingZeroBitCount)
    }
}

extension ChunkReader {
    /// One range to check: `size` bytes at `offset` of the open file `fd`, which must hash to
    /// `hash`.
    package struct Check: Sendable {
        package let fd: Int32
        package let offset: UInt64
        package let size: UInt32
        package let hash: ChunkHash

        package init(fd: Int32, offset: UInt64, size: UInt32, hash: ChunkHash) {
            self.fd = fd
            self.offset = offset
            self.size = size
            self.hash = hash
        }
    }

    /// The positions in `checks` whose bytes do not hash right (or cannot be read in full),
    /// read and hashed on up to four cores: what a local copy reuses, or a resumed partial
    /// file holds, is verified before it is trusted.
    package static func mismatches(_ checks: [Check]) -> Set<Int> {
        guard !checks.isEmpty else { return [] }
        let failed = Mutex<Set<Int>>([])
        let workers = min(checks.count, max(1, min(4, ProcessInfo.processInfo.activeProcessorCount)))
        let largest = checks.reduce(1) { max($0, Int($1.size)) }
        guard largest <= maxReadSize else { return Set(checks.indices) }
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: largest, alignment: 64)
            defer { buffer.deallocate() }
            for n in stride(from: worker, to: checks.count, by: workers) {
                let check = checks[n]
                let bytes = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(check.size)])
                let good = (try? ChunkReader(fileDescriptor: check.fd).read(at: check.offset, into: bytes)) != nil
                    && ChunkHash.of(UnsafeRawBufferPointer(bytes)) == check.hash
                if !good { failed.withLock { _ = $0.insert(n) } }
            }
        }
        return failed.withLock { $0 }
    }
}
