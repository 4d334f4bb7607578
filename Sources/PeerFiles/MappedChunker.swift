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
/// grows is read on to its new end, as `pread` would.
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

    /// The smallest file chunked through mapped windows: below it `pread` costs less than
    /// mapping and unmapping.
    static let smallestFile: UInt64 = 4 << 20

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
            guard let window = MappedWindow.map(fd: fd, offset: position, count: count) else {
                // (`map` checks the size again: a file cut short since is a changed file.)
                var now = stat()
                if fstat(fd, &now) == 0 && UInt64(max(0, now.st_size)) < position + UInt64(count) {
                    throw FileError(kind: .changedOnDisk, operation: "read", path: path,
                                    message: "the file ends before \(position + UInt64(count)); it changed while it was read")
                }
                throw FileError(kind: .io, operation: "map", path: path, message: "the file could not be mapped for reading")
            }
            let batch = cutAndHash(window, atEnd: atEnd)
            if atEnd { finished = true }   // as `pread` reading 0 there: what grows later is not read
            if window.faulted {
                throw FileError(kind: .changedOnDisk, operation: "read", path: path,
                                message: "the file ends before \(position + UInt64(count)); it changed while it was read")
            }
            if let last = batch.chunks.last { position = last.end }
            if !batch.chunks.isEmpty { return batch }
        }
        return ([], [])
    }

    /// Every final cut of the window, then the hashes of those chunks (on `hashThreads`).
    /// (Hashing every 2 MiB of chunks as they are cut, while the cut's reads of them are in
    /// the cache, measured the same CPU-s.)
    private func cutAndHash(_ window: MappedWindow, atEnd: Bool) -> (chunks: [ChunkRef], sums: [QuickSum]) {
        let base = window.bytes.baseAddress!
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var chunks: [ChunkRef] = []
        var start = 0
        let end = window.bytes.count
        while end - start > 0 && (end - start >= parameters.maxSize || atEnd) {
            let length = Chunker.cutLength(bytes + start, count: end - start, parameters: parameters)
            chunks.append(ChunkRef(offset: window.offset + UInt64(start), size: UInt32(length), hash: Self.zeroHash))
            start += length
        }
        var sums = quickSums ? [QuickSum](repeating: QuickSum(low: 0, high: 0), count: chunks.count) : []
        let first = window.offset
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
