internal import Dispatch
internal import Glibc

/// Streaming FastCDC over a file: reads it once, in large blocks, and yields each chunk
/// with its offset, size and BLAKE3 hash (`ChunkHash.of`). The chunks are exactly those of
/// `Chunker.boundaries` over the whole file, whatever the block size.
///
/// Memory is bounded: two or three buffers of `readBlockSize + parameters.maxSize` bytes (at
/// most 48 MiB in all with the defaults: `readAheadBudget`). The chunks of each block are
/// hashed while the block is in memory, on up to `hashThreads` threads (chunks are
/// independent), so the file is read from disk once; with more than one thread the next
/// block is read meanwhile too (A-send's chunking of 1 GiB before the offer: 0.87 → 0.73 s;
/// `syncpeer-bench chunk`: 1.29 → 1.51 GB/s).
///
/// Reads with `pread` from offset 0 to the end of the file; the descriptor's position is
/// not used or changed. `next()` blocks (disk reads, CPU work on up to `hashThreads`
/// threads through `DispatchQueue.concurrentPerform`): call it from a thread or queue of
/// its own, not from a latency-sensitive one. Not thread-safe: one chunker per thread.
///
/// Measured on the 2-core build machine, release build, 512 MiB in the page cache:
/// ≈ 1.2 GB/s with `hashThreads: 2`, ≈ 0.65 GB/s with 1 (cutting ≈ 0.48 and BLAKE2b ≈
/// 0.96 CPU-seconds per GB, when BLAKE2b was the chunk hash; BLAKE3 since protocol 4 costs
/// ≈ 0.2-0.4, so the cut now sets the pace); see `ChunkerBenchmark` in the tests.
package final class FileChunker {
    package let parameters: ChunkParameters
    /// The path, for error messages.
    package let path: String
    /// Bytes of the file consumed by the chunks returned so far.
    package private(set) var bytesChunked: UInt64 = 0
    /// With `quickSums`, the `QuickSum` of each chunk returned so far (for `ChunkSums`).
    package private(set) var sums: [QuickSum] = []

    private let fd: Int32
    private let ownsDescriptor: Bool
    private let hashThreads: Int
    private let quickSums: Bool
    private let readBlockSize: Int
    /// A large regular file is cut and hashed straight from the page cache (no buffers).
    private let mapped: MappedChunker?
    /// Three buffers of `parameters.maxSize + readBlockSize` bytes, in turn: the chunks of the
    /// last cut are hashed in `hashing` while the next window is cut in `filled` (the block
    /// read ahead into it, with the last cut's uncut tail moved in front of it) and the block
    /// after that is read into `spare`. So reading, cutting and hashing run side by side and
    /// the serial cut waits for no read.
    /// (`spare` is allocated at the first read into it: a file read whole by the first read
    /// needs two buffers, as a small file's chunker does.)
    private var hashing: UnsafeMutableRawPointer
    private var filled: UnsafeMutableRawPointer
    private var spare: UnsafeMutableRawPointer?
    private var allocations: [(pointer: UnsafeMutableRawPointer, capacity: Int)] = []
    /// Where the buffers come from and go back to (nil: allocated and freed here).
    private let buffers: ChunkBuffers?
    private let capacity: Int
    /// The last window cut ended the file: nothing is left to cut.
    private var finished = false
    /// Whether the next block is read while a window is cut (with a third buffer), or by the
    /// cut itself first (two buffers: one thread, or the largest chunk sizes, whose three
    /// buffers would take 72 MiB).
    private let readsAhead: Bool
    /// The most the three buffers of a chunker that reads ahead may take by default (what two
    /// buffers take for the largest chunk sizes).
    package static let readAheadBudget = 48 << 20
    /// The block in `filled` (at offset `maxSize`), and the one being read into `spare`.
    private var block = Block()
    private var incoming = Block()
    private var window = Window()      // the uncut bytes, in `hashing` once a cut is done
    private var readOffset: UInt64 = 0 // next pread offset
    private var readEOF = false
    private var started = false
    /// The error that stopped the chunker (a failed read), thrown again by every `next()`.
    private var stoppedBy: FileError?
    /// Cut but not yet hashed: the chunks in `hashing` (offsets relative to it).
    private var pending: [ChunkRef] = []
    private var pendingStarts: [Int] = []
    private var ready: [ChunkRef] = []
    private var pendingSums: [QuickSum] = []
    private var readySums: [QuickSum] = []
    private var readyIndex = 0

    /// Where the uncut bytes are in the buffer last cut.
    private struct Window {
        var start = 0                       // first byte not yet cut
        var end = 0                         // one past the last byte read
        var base: Int64 = 0                 // file offset of buffer[0] (negative for the first block)
    }

    /// A block read from the file: `count` bytes at `maxSize` in its buffer.
    private struct Block {
        var count = 0
        var fileOffset: UInt64 = 0
        /// The file ends with this block (a read returned 0).
        var atEOF = false
    }

    /// The default read block: 8 MiB.
    package static let defaultReadBlockSize = 8 << 20

    /// Chunks an open file. The chunker does not close `fileDescriptor` unless
    /// `ownsDescriptor` is true.
    /// - Parameters:
    ///   - readBlockSize: bytes read per batch (≥ 1; tests use tiny ones).
    ///   - hashThreads: 1 = everything on the caller's thread; more = cutting the next
    ///     block and hashing the chunks of the current one run in parallel (Dispatch).
    ///   - quickSums: also compute each chunk's `QuickSum` (`sums`).
    ///   - readAheadBudget: with more than one thread, the next block is read while a window
    ///     is cut if the three buffers this takes fit in these many bytes (else two buffers,
    ///     and each block is read before its cut).
    ///   - buffers: the calling thread's pool to take the buffers from (and give them back
    ///     to when the chunker ends); nil allocates them for this file.
    ///   - maps: large files are cut from mapped windows (`MappedChunker`). The scanner reads
    ///     them instead: its reads overlap the cut of the window before (`readsAhead`), while a
    ///     window is mapped (and populated) before its cut; A-share, 6 alternating release runs:
    ///     1.31–1.32 s mapped against 1.12–1.21 s read.
    package init(fileDescriptor: Int32, path: String = "", parameters: ChunkParameters,
                readBlockSize: Int = FileChunker.defaultReadBlockSize, hashThreads: Int = 2,
                ownsDescriptor: Bool = false, quickSums: Bool = false, readAheadBudget: Int = FileChunker.readAheadBudget,
                buffers: ChunkBuffers? = nil, maps: Bool = true) {
        precondition(readBlockSize >= 1, "FileChunker: readBlockSize must be at least 1")
        self.fd = fileDescriptor
        self.path = path
        self.parameters = parameters
        self.hashThreads = max(1, hashThreads)
        self.ownsDescriptor = ownsDescriptor
        self.quickSums = quickSums
        self.readBlockSize = readBlockSize
        // Room for a block and, in front of it, for an uncut tail (always shorter than maxSize).
        mapped = maps && MappedChunker.suits(fileDescriptor)
            ? MappedChunker(fd: fileDescriptor, path: path, parameters: parameters, readBlockSize: readBlockSize,
                            hashThreads: self.hashThreads, quickSums: quickSums)
            : nil
        capacity = mapped == nil ? readBlockSize + parameters.maxSize : 0
        readsAhead = mapped == nil && self.hashThreads > 1 && 3 * capacity <= readAheadBudget
        self.buffers = buffers
        let first = Self.buffer(max(capacity, 1), from: buffers)
        let second = Self.buffer(max(capacity, 1), from: buffers)
        hashing = first.pointer
        filled = second.pointer
        allocations = [first, second]
        _ = posix_fadvise(fileDescriptor, 0, 0, POSIX_FADV_SEQUENTIAL)
    }

    /// Opens `path` read-only and chunks it; `parameters` default to
    /// `ChunkParameters.forFileSize` of the file's current size.
    package convenience init(path: String, parameters: ChunkParameters? = nil,
                            readBlockSize: Int = FileChunker.defaultReadBlockSize, hashThreads: Int = 2) throws(FileError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError.system("open", path: path, errno: errno) }
        var params = parameters
        if params == nil {
            var st = stat()
            guard fstat(fd, &st) == 0 else {
                let code = errno
                close(fd)
                throw FileError.system("fstat", path: path, errno: code)
            }
            params = ChunkParameters.forFileSize(UInt64(st.st_size))
        }
        self.init(fileDescriptor: fd, path: path, parameters: params!, readBlockSize: readBlockSize,
                  hashThreads: hashThreads, ownsDescriptor: true)
    }

    deinit {
        for buffer in allocations {
            if let buffers { buffers.giveBack(buffer) } else { buffer.pointer.deallocate() }
        }
        if ownsDescriptor { close(fd) }
    }

    /// A buffer of `count` bytes: from the pool, or allocated.
    private static func buffer(_ count: Int, from buffers: ChunkBuffers?) -> (pointer: UnsafeMutableRawPointer, capacity: Int) {
        buffers?.take(count) ?? (UnsafeMutableRawPointer.allocate(byteCount: count, alignment: ChunkBuffers.alignment), count)
    }

    /// The next chunk, or nil at the end of the file.
    /// After an error every later call throws it again: the chunker stopped mid-file, and
    /// nothing it would yield then is right.
    package func next() throws(FileError) -> ChunkRef? {
        if let stoppedBy { throw stoppedBy }
        if readyIndex == ready.count {
            do throws(FileError) {
                try produceBatch()
            } catch {
                stoppedBy = error
                throw error
            }
            if ready.isEmpty { return nil }
        }
        let chunk = ready[readyIndex]
        if quickSums { sums.append(readySums[readyIndex]) }
        readyIndex += 1
        bytesChunked = chunk.end
        return chunk
    }

    /// All remaining chunks.
    package func allChunks() throws(FileError) -> [ChunkRef] {
        var out: [ChunkRef] = []
        while let c = try next() { out.append(c) }
        return out
    }

    /// The manifest of the file at `path` (parameters from its size unless given).
    /// `progress` gets the bytes chunked and hashed so far, after each chunk.
    package static func manifest(ofFileAt path: String, parameters: ChunkParameters? = nil,
                                progress: ((UInt64) -> Void)? = nil) throws(FileError) -> Manifest {
        let chunker = try FileChunker(path: path, parameters: parameters)
        var chunks: [ChunkRef] = []
        while let chunk = try chunker.next() {
            chunks.append(chunk)
            progress?(chunker.bytesChunked)
        }
        do {
            return try Manifest(fileSize: chunker.bytesChunked, chunks: chunks)
        } catch {
            throw FileError(kind: .invalidArgument, operation: "manifest", path: path, message: error.description)
        }
    }

    /// One pipeline step: hash the pending chunks (in `hashing`) while the next window is cut
    /// (in `filled`) and the block after it is read (into `spare`); the hashed chunks become
    /// `ready`.
    private func produceBatch() throws(FileError) {
        ready.removeAll(keepingCapacity: true)
        readyIndex = 0
        if let mapped {
            (ready, readySums) = try mapped.nextBatch()
            return
        }
        if !started {
            started = true
            if readsAhead { block = try readBlock(into: filled) }
            var cut: (chunks: [ChunkRef], starts: [Int]) = ([], [])
            try cutUntilChunks(into: &cut)
            (pending, pendingStarts) = cut
        }
        if pending.isEmpty { return }

        var next: (chunks: [ChunkRef], starts: [Int]) = ([], [])
        next.chunks.reserveCapacity(pending.count)
        next.starts.reserveCapacity(pending.count)
        var failure: FileError?
        let count = pending.count
        let hashed = UnsafeRawPointer(hashing)
        let withSums = quickSums
        pendingSums = withSums ? [QuickSum](repeating: QuickSum(low: 0, high: 0), count: count) : []
        if hashThreads == 1 {
            // One thread never reads ahead (`readsAhead`): the cut reads its block itself.
            do { try advance(into: &next) } catch { failure = error }
            for i in 0..<count {
                let region = UnsafeRawBufferPointer(start: hashed + pendingStarts[i], count: Int(pending[i].size))
                pending[i].hash = ChunkHash.of(region)
                if withSums { pendingSums[i] = QuickSum.of(region) }
            }
        } else {
            withUnsafeMutablePointer(to: &next) { nextPointer in
                withUnsafeMutablePointer(to: &failure) { failurePointer in
                    pending.withUnsafeMutableBufferPointer { chunks in
                        pendingSums.withUnsafeMutableBufferPointer { sums in
                            pendingStarts.withUnsafeBufferPointer { starts in
                                // Iteration 0 cuts the next window: it reads the tail in `hashing`
                                // and writes `filled`, `window`, `finished` and `next` (without
                                // read-ahead it first reads its block: also `block`, the read
                                // position, `readEOF` and `failure`). The last one reads the block
                                // after it (with read-ahead only): it writes `spare` (allocating it
                                // into `allocations` the first time), `incoming`, the read position,
                                // `readEOF` and `failure`. Iteration i in 1 … count hashes pending
                                // chunk i − 1: it reads `hashing` and writes only that chunk. Only
                                // one of the first two ever reads the file. The iterations touch
                                // disjoint memory, hence the unchecked wrapper.
                                let shared = UncheckedSendable((chunker: self, data: hashed, chunks: chunks.baseAddress!,
                                                                sums: withSums ? sums.baseAddress : nil, starts: starts.baseAddress!,
                                                                next: nextPointer, failure: failurePointer))
                                DispatchQueue.concurrentPerform(iterations: count + 2) { j in
                                    let p = shared.value
                                    if j == 0 {
                                        do throws(FileError) { try p.chunker.advance(into: &p.next.pointee) } catch { p.failure.pointee = error }
                                    } else if j == count + 1 {
                                        do throws(FileError) { p.chunker.incoming = try p.chunker.readAhead() } catch {
                                            p.failure.pointee = error   // only one of the two iterations reads
                                        }
                                    } else {
                                        let region = UnsafeRawBufferPointer(start: p.data + p.starts[j - 1], count: Int(p.chunks[j - 1].size))
                                        p.chunks[j - 1].hash = ChunkHash.of(region)
                                        if let sums = p.sums { sums[j - 1] = QuickSum.of(region) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        if let failure { throw failure }
        rotate()
        // A window shorter than maxSize (read blocks smaller than that) has no final cut yet.
        try cutUntilChunks(into: &next)
        swap(&ready, &pending)
        readySums = pendingSums
        (pending, pendingStarts) = next
    }

    /// Cuts window after window (the block in `filled`, then the next one read) until one
    /// gives a chunk or the file is finished.
    private func cutUntilChunks(into cut: inout (chunks: [ChunkRef], starts: [Int])) throws(FileError) {
        while cut.chunks.isEmpty && !finished {
            try advance(into: &cut)
            incoming = try readAhead()
            rotate()
        }
    }

    /// The block after the one in `filled`, read into `spare` (allocated now if it is the
    /// first); past the end of the file an empty block, and nothing is read or allocated.
    private func readAhead() throws(FileError) -> Block {
        guard readsAhead else { return Block() }   // `advance` reads its block itself
        if readEOF { return Block(count: 0, fileOffset: readOffset, atEOF: true) }
        if spare == nil {
            let buffer = Self.buffer(capacity, from: buffers)
            allocations.append(buffer)
            spare = buffer.pointer
        }
        return try readBlock(into: spare!)
    }

    /// Reads the next block of the file (up to `readBlockSize` bytes) at `maxSize` in `buffer`,
    /// leaving room for an uncut tail in front of it.
    private func readBlock(into buffer: UnsafeMutableRawPointer) throws(FileError) -> Block {
        var got = Block(count: 0, fileOffset: readOffset, atEOF: readEOF)
        let start = buffer + parameters.maxSize
        while !readEOF && got.count < readBlockSize {
            let n = pread(fd, start + got.count, readBlockSize - got.count, off_t(readOffset))
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError.system("read", path: path, errno: errno)
            }
            if n == 0 { readEOF = true; break }
            got.count += n
            readOffset += UInt64(n)
        }
        got.atEOF = readEOF
        return got
    }

    /// Moves the last cut's uncut tail (in `hashing`, shorter than `maxSize`) in front of the
    /// block in `filled` and cuts every chunk that is final; the cut chunks and the new tail
    /// are then in `filled` (`rotate` makes it `hashing`).
    private func advance(into cut: inout (chunks: [ChunkRef], starts: [Int])) throws(FileError) {
        if !readsAhead { block = try readBlock(into: filled) }
        let maxSize = parameters.maxSize
        let tail = window.end - window.start
        if tail > 0 { memcpy(filled + (maxSize - tail), hashing + window.start, tail) }
        window = Window(start: maxSize - tail, end: maxSize + block.count, base: Int64(block.fileOffset) - Int64(maxSize))
        let atEOF = block.atEOF
        if atEOF { finished = true }   // everything left is cut below
        let bytes = filled.assumingMemoryBound(to: UInt8.self)
        // A cut is final only with at least maxSize bytes ahead, or at the end of the file.
        while window.end - window.start > 0 && (window.end - window.start >= maxSize || atEOF) {
            let length = Chunker.cutLength(bytes + window.start, count: window.end - window.start, parameters: parameters)
            cut.starts.append(window.start)
            cut.chunks.append(ChunkRef(offset: UInt64(window.base + Int64(window.start)), size: UInt32(length), hash: Self.zeroHash))
            window.start += length
        }
    }

    /// After a cut and a read: the cut buffer is hashed next, the block read is cut next, and
    /// the buffer just hashed takes the read after that.
    /// Without a `spare` the two buffers swap: always without read-ahead; with it, only when
    /// the first read took the whole file, and then no cut writes `filled` again (nothing is
    /// left to cut).
    private func rotate() {
        let free = hashing
        hashing = filled
        if let next = spare {
            filled = next
            spare = free
        } else {
            filled = free
        }
        if readsAhead { block = incoming }
    }

    private static let zeroHash = ChunkHash(bytes: [UInt8](repeating: 0, count: 32))!
}

/// Lets pointers cross into a `@Sendable` closure where the caller guarantees that the
/// threads touch disjoint memory.
// @unchecked: raw memory (pointers, and the chunker whose fields the read and cut iterations
// split) shared by `concurrentPerform` iterations that each touch only their own part (said at
// each use); the compiler cannot see that, and a lock would serialise the iterations.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
