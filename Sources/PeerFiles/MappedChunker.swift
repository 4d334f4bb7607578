internal import Dispatch
internal import Glibc

/// `FileChunker`'s way through a large regular file: FastCDC and the chunk hashes run
/// straight over the page cache, one `MappedWindow` of `readBlockSize + maxSize` bytes at a
/// time, instead of over blocks copied out of it by `pread` and tails moved between buffers
/// (A-send of 1 GiB: 0.13 CPU-s of reads and 0.04 of tail moves; a window's mapping costs a
/// fraction of that). The chunks are exactly `Chunker.boundaries` of the whole file: a cut is
/// final with `maxSize` bytes ahead of it or at the end of the file, as in `FileChunker`.
///
/// A file that shrinks while it is read throws `changedOnDisk` (the guard of
/// `MappedWindow` turned the missing pages into zeros, which are never handed out); one that
/// grows is read on to its new end, as `pread` would. A window that cannot be mapped (every
/// slot of the guard in use) is read into a buffer instead, the same chunks either way.
final class MappedChunker {
    private let fd: Int32
    private let path: String
    private let parameters: ChunkParameters
    private let windowSize: Int
    private let hashThreads: Int
    private let quickSums: Bool
    /// Where the next window starts: the end of the last chunk cut.
    private var position: UInt64 = 0
    private var finished = false
    /// Where a window is read when it cannot be mapped (allocated then, kept to the end).
    private var fallback: UnsafeMutableRawBufferPointer?

    /// The smallest file chunked through mapped windows: below it `pread` costs less than
    /// mapping and unmapping.
    static let smallestFile: UInt64 = 4 << 20

    deinit { fallback?.deallocate() }

    init(fd: Int32, path: String, parameters: ChunkParameters, readBlockSize: Int, hashThreads: Int, quickSums: Bool) {
        self.fd = fd
        self.path = path
        self.parameters = parameters
        windowSize = readBlockSize + parameters.maxSize
        self.hashThreads = hashThreads
        self.quickSums = quickSums
    }

    /// Whether `fd` is a regular file large enough to be worth mapping, on a file system that
    /// maps it (a first page mapped and let go: some FUSE file systems cannot, and those files
    /// are read with `pread` as before).
    static func suits(_ fd: Int32) -> Bool {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, UInt64(st.st_size) >= smallestFile,
              let probe = mmap(nil, SignalGuard.pageSize, PROT_READ, MAP_SHARED, fd, 0), probe != MAP_FAILED else { return false }
        munmap(probe, SignalGuard.pageSize)
        return true
    }

    /// The chunks of the next window, hashed (and their quick sums), or empty at the end.
    func nextBatch() throws(FileError) -> (chunks: [ChunkRef], sums: [QuickSum]) {
        while !finished {
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw FileError.system("fstat", path: path, errno: errno) }
            let size = UInt64(max(0, st.st_size))
            guard size > position else {
                finished = true
                break
            }
            let count = Int(min(UInt64(windowSize), size - position))
            let atEnd = position + UInt64(count) == size
            let batch: (chunks: [ChunkRef], sums: [QuickSum])
            if let window = MappedWindow.map(fd: fd, offset: position, count: count) {
                batch = cutAndHash(window.bytes, at: position, atEnd: atEnd)
                if window.faulted {
                    throw FileError(kind: .changedOnDisk, operation: "read", path: path,
                                    message: "the file ends before \(position + UInt64(count)); it changed while it was read")
                }
            } else {
                // No slot free (every window in use) or no mapping: this window is read.
                if fallback == nil { fallback = UnsafeMutableRawBufferPointer.allocate(byteCount: windowSize, alignment: 64) }
                let buffer = UnsafeMutableRawBufferPointer(rebasing: fallback![0..<count])
                try ChunkReader(fileDescriptor: fd, path: path).read(at: position, into: buffer)
                batch = cutAndHash(UnsafeRawBufferPointer(buffer), at: position, atEnd: atEnd)
            }
            if atEnd { finished = true }   // as `pread` reading 0 there: what grows later is not read
            if let last = batch.chunks.last { position = last.end }
            if !batch.chunks.isEmpty { return batch }
        }
        return ([], [])
    }

    /// Every final cut of the window, then the hashes of those chunks (on `hashThreads`).
    /// (Hashing every 2 MiB of chunks as they are cut, while the cut's reads of them are in
    /// the cache, measured the same CPU-s.)
    private func cutAndHash(_ window: UnsafeRawBufferPointer, at first: UInt64, atEnd: Bool) -> (chunks: [ChunkRef], sums: [QuickSum]) {
        let base = window.baseAddress!
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var chunks: [ChunkRef] = []
        var start = 0
        let end = window.count
        while end - start > 0 && (end - start >= parameters.maxSize || atEnd) {
            let length = Chunker.cutLength(bytes + start, count: end - start, parameters: parameters)
            chunks.append(ChunkRef(offset: first + UInt64(start), size: UInt32(length), hash: Self.zeroHash))
            start += length
        }
        var sums = quickSums ? [QuickSum](repeating: QuickSum(low: 0, high: 0), count: chunks.count) : []
        chunks.withUnsafeMutableBufferPointer { list in
            sums.withUnsafeMutableBufferPointer { sumList in
                let shared = UncheckedSendable((list: list, sums: quickSums ? sumList.baseAddress : nil, base: base))
                let hash: @Sendable (Int) -> Void = { i in
                    let p = shared.value
                    let region = UnsafeRawBufferPointer(start: p.base + Int(p.list[i].offset - first), count: Int(p.list[i].size))
                    p.list[i].hash = ChunkHash.of(region)
                    if let sums = p.sums { sums[i] = QuickSum.of(region) }
                }
                if hashThreads > 1 && list.count > 1 {
                    // Each iteration writes only its own chunk (and sum).
                    DispatchQueue.concurrentPerform(iterations: list.count) { hash($0) }
                } else {
                    for i in list.indices { hash(i) }
                }
            }
        }
        return (chunks, sums)
    }

    private static let zeroHash = ChunkHash(bytes: [UInt8](repeating: 0, count: 32))!
}
