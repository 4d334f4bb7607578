internal import Dispatch
internal import Glibc

/// Streaming FastCDC over a file: reads it once, in large blocks, and yields each chunk
/// with its offset, size and BLAKE3 hash (`ChunkHash.of`). The chunks are exactly those of
/// `Chunker.boundaries` over the whole file, whatever the block size.
///
/// Memory is bounded: one buffer of `readBlockSize + parameters.maxSize` bytes (at most
/// 8 MiB + 16 MiB with the defaults). The chunks of each block are hashed while the
/// block is in memory, on up to `hashThreads` threads (chunks are independent), so the
/// file is read from disk once.
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
public final class FileChunker {
    public let parameters: ChunkParameters
    /// The path, for error messages.
    public let path: String
    /// Bytes of the file consumed by the chunks returned so far.
    public private(set) var bytesChunked: UInt64 = 0
    /// With `quickSums`, the `QuickSum` of each chunk returned so far (for `ChunkSums`).
    public private(set) var sums: [QuickSum] = []

    private let fd: Int32
    private let ownsDescriptor: Bool
    private let hashThreads: Int
    private let quickSums: Bool
    private let capacity: Int
    /// Two buffers: chunks of one are hashed while the next block is read into the other
    /// and cut (double buffering), so cutting and hashing run side by side.
    private var buffers: (UnsafeMutableRawPointer, UnsafeMutableRawPointer)
    private var window = Window()      // the uncut bytes, in buffers.0
    private var readOffset: UInt64 = 0 // next pread offset
    private var atEOF = false
    private var started = false
    /// Cut but not yet hashed: the chunks of buffers.1 (offsets relative to it).
    private var pending: [ChunkRef] = []
    private var pendingStarts: [Int] = []
    private var ready: [ChunkRef] = []
    private var pendingSums: [QuickSum] = []
    private var readySums: [QuickSum] = []
    private var readyIndex = 0

    /// Where the uncut bytes are in the current buffer.
    private struct Window {
        var start = 0                       // first byte not yet cut
        var end = 0                         // one past the last byte read
        var fileOffset: UInt64 = 0          // file offset of buffer[0]
    }

    /// The default read block: 8 MiB.
    public static let defaultReadBlockSize = 8 << 20

    /// Chunks an open file. The chunker does not close `fileDescriptor` unless
    /// `ownsDescriptor` is true.
    /// - Parameters:
    ///   - readBlockSize: bytes read per batch (≥ 1; tests use tiny ones).
    ///   - hashThreads: 1 = everything on the caller's thread; more = cutting the next
    ///     block and hashing the chunks of the current one run in parallel (Dispatch).
    ///   - quickSums: also compute each chunk's `QuickSum` (`sums`).
    public init(fileDescriptor: Int32, path: String = "", parameters: ChunkParameters,
                readBlockSize: Int = FileChunker.defaultReadBlockSize, hashThreads: Int = 2,
                ownsDescriptor: Bool = false, quickSums: Bool = false) {
        precondition(readBlockSize >= 1, "FileChunker: readBlockSize must be at least 1")
        self.fd = fileDescriptor
        self.path = path
        self.parameters = parameters
        self.hashThreads = max(1, hashThreads)
        self.ownsDescriptor = ownsDescriptor
        self.quickSums = quickSums
        capacity = readBlockSize + parameters.maxSize
        buffers = (UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64),
                   UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64))
        _ = posix_fadvise(fileDescriptor, 0, 0, POSIX_FADV_SEQUENTIAL)
    }

    /// Opens `path` read-only and chunks it; `parameters` default to
    /// `ChunkParameters.forFileSize` of the file's current size.
    public convenience init(path: String, parameters: ChunkParameters? = nil,
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
        buffers.0.deallocate()
        buffers.1.deallocate()
        if ownsDescriptor { close(fd) }
    }

    /// The next chunk, or nil at the end of the file.
    public func next() throws(FileError) -> ChunkRef? {
        if readyIndex == ready.count {
            try produceBatch()
            if ready.isEmpty { return nil }
        }
        let chunk = ready[readyIndex]
        if quickSums { sums.append(readySums[readyIndex]) }
        readyIndex += 1
        bytesChunked = chunk.end
        return chunk
    }

    /// All remaining chunks.
    public func allChunks() throws(FileError) -> [ChunkRef] {
        var out: [ChunkRef] = []
        while let c = try next() { out.append(c) }
        return out
    }

    /// The manifest of the file at `path` (parameters from its size unless given).
    /// `progress` gets the bytes chunked and hashed so far, after each chunk.
    public static func manifest(ofFileAt path: String, parameters: ChunkParameters? = nil,
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

    /// One pipeline step: hash the pending chunks (in buffers.1) while the next block is
    /// read into buffers.0 and cut; the hashed chunks become `ready`.
    private func produceBatch() throws(FileError) {
        ready.removeAll(keepingCapacity: true)
        readyIndex = 0
        if !started {
            started = true
            var cut: (chunks: [ChunkRef], starts: [Int]) = ([], [])
            try advance(into: &cut)
            (pending, pendingStarts) = cut
        }
        if pending.isEmpty { return }

        var next: (chunks: [ChunkRef], starts: [Int]) = ([], [])
        next.chunks.reserveCapacity(pending.count)
        next.starts.reserveCapacity(pending.count)
        var failure: FileError?
        let count = pending.count
        let hashed = UnsafeRawPointer(buffers.1)
        let withSums = quickSums
        pendingSums = withSums ? [QuickSum](repeating: QuickSum(low: 0, high: 0), count: count) : []
        if hashThreads == 1 {
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
                                // Iteration 0 reads and cuts the next block (it writes only
                                // buffers.0, `window` and `next`); iteration i > 0 hashes pending
                                // chunk i − 1 (it reads buffers.1 and writes only that chunk).
                                // The iterations touch disjoint memory, hence the unchecked wrapper.
                                let shared = UncheckedSendable((chunker: self, data: hashed, chunks: chunks.baseAddress!,
                                                                sums: withSums ? sums.baseAddress : nil, starts: starts.baseAddress!,
                                                                next: nextPointer, failure: failurePointer))
                                DispatchQueue.concurrentPerform(iterations: count + 1) { j in
                                    let p = shared.value
                                    if j == 0 {
                                        do throws(FileError) { try p.chunker.advance(into: &p.next.pointee) } catch { p.failure.pointee = error }
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
        swap(&ready, &pending)
        readySums = pendingSums
        (pending, pendingStarts) = next
    }

    /// Refills buffers.0 (after moving the uncut tail to its front) and cuts every chunk
    /// that is final; then swaps the buffers so the cut chunks are in buffers.1.
    private func advance(into cut: inout (chunks: [ChunkRef], starts: [Int])) throws(FileError) {
        // The uncut tail is in buffers.1 after the previous swap (or nowhere at the start).
        let source = buffers.1
        let target = buffers.0
        let pendingBytes = window.end - window.start
        if pendingBytes > 0 { memcpy(target, source + window.start, pendingBytes) }
        window.fileOffset += UInt64(window.start)
        window.end = pendingBytes
        window.start = 0
        while !atEOF && window.end < capacity {
            let n = pread(fd, target + window.end, capacity - window.end, off_t(readOffset))
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError.system("read", path: path, errno: errno)
            }
            if n == 0 { atEOF = true; break }
            window.end += n
            readOffset += UInt64(n)
        }
        let maxSize = parameters.maxSize
        let bytes = target.assumingMemoryBound(to: UInt8.self)
        // A cut is final only with at least maxSize bytes ahead, or at the end of the file.
        while window.end - window.start > 0 && (window.end - window.start >= maxSize || atEOF) {
            let length = Chunker.cutLength(bytes + window.start, count: window.end - window.start, parameters: parameters)
            cut.starts.append(window.start)
            cut.chunks.append(ChunkRef(offset: window.fileOffset + UInt64(window.start), size: UInt32(length), hash: Self.zeroHash))
            window.start += length
        }
        buffers = (buffers.1, buffers.0)
    }

    private static let zeroHash = ChunkHash(bytes: [UInt8](repeating: 0, count: 32))!
}

/// Lets pointers cross into a `@Sendable` closure where the caller guarantees that the
/// threads touch disjoint memory.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
