internal import Dispatch
internal import Glibc
internal import Synchronization

/// Re-chunks a file that changed since `previous` was made from it, hashing (FastCDC cut
/// and BLAKE3) only what changed: the result is exactly the manifest `FileChunker` would
/// make of the whole file now.
///
/// Why that holds: a FastCDC cut made from a chunk start depends only on the bytes of the
/// chunk it ends (`Chunker.cutLength` reads no byte past the cut, and the end of the file
/// matters only to the last chunk). So where the walk stands at the start of an old chunk
/// whose bytes are unchanged, and that is not the old last chunk (unless the size is the
/// same), the old chunk is the new one too. Everywhere else the walk cuts and hashes anew,
/// until a cut lands on the start of an unchanged old chunk again.
///
/// Unchanged is told by `QuickSum` (the old sums come from `ChunkSums`), computed over
/// every old chunk on `threads` threads: it reads the whole file but hashes it several
/// times faster than the content hash, and cuts nothing. Memory: one buffer of the largest chunk
/// per thread, freed on return.
package enum DeltaChunker {
    package struct Result: Sendable {
        package let chunks: [ChunkRef]
        /// The quick sum of each chunk (for the next change).
        package let sums: [QuickSum]
        /// Bytes read from the file, and bytes cut and hashed with BLAKE3.
        package let bytesRead: UInt64
        package let bytesHashed: UInt64
    }

    /// Nil when `previous` cannot be the base (other chunk parameters, or sums that do not
    /// match its chunks): then the file is chunked whole.
    package static func rechunk(fileDescriptor fd: Int32, path: String, size: UInt64, previous: Manifest, sums: [QuickSum],
                               threads: Int = 2) throws(FileError) -> Result? {
        let parameters = ChunkParameters.forFileSize(size)
        guard parameters == ChunkParameters.forFileSize(previous.fileSize), sums.count == previous.chunks.count else { return nil }
        let old = previous.chunks
        let same = try unchanged(old, sums: sums, fd: fd, path: path, size: size, threads: threads)
        var bytesRead = old.reduce(UInt64(0)) { $0 + ($1.end <= size ? UInt64($1.size) : 0) }

        let buffer = UnsafeMutableRawPointer.allocate(byteCount: parameters.maxSize, alignment: 64)
        defer { buffer.deallocate() }
        var chunks: [ChunkRef] = []
        var newSums: [QuickSum] = []
        chunks.reserveCapacity(old.count)
        newSums.reserveCapacity(old.count)
        var position: UInt64 = 0
        var i = 0
        var bytesHashed: UInt64 = 0
        while position < size {
            if i < old.count, old[i].offset == position, same[i], i < old.count - 1 || size == previous.fileSize {
                chunks.append(old[i])
                newSums.append(sums[i])
                position = old[i].end
                i += 1
                continue
            }
            let count = Int(min(UInt64(parameters.maxSize), size - position))
            try read(fd, into: buffer, count: count, at: position, path: path)
            bytesRead += UInt64(count)
            let length = Chunker.cutLength(buffer.assumingMemoryBound(to: UInt8.self), count: count, parameters: parameters)
            let region = UnsafeRawBufferPointer(start: buffer, count: length)
            chunks.append(ChunkRef(offset: position, size: UInt32(length), hash: ChunkHash.of(region)))
            newSums.append(QuickSum.of(region))
            bytesHashed += UInt64(length)
            position += UInt64(length)
            while i < old.count && old[i].offset < position { i += 1 }
        }
        return Result(chunks: chunks, sums: newSums, bytesRead: bytesRead, bytesHashed: bytesHashed)
    }

    /// For each old chunk: whether the file holds the same bytes there now (by quick sum).
    private static func unchanged(_ old: [ChunkRef], sums: [QuickSum], fd: Int32, path: String, size: UInt64,
                                  threads: Int) throws(FileError) -> [Bool] {
        var same = [Bool](repeating: false, count: old.count)
        guard !old.isEmpty else { return same }
        let largest = Int(old.map(\.size).max() ?? 0)
        // More slices than threads, so that a slow one does not hold the others up.
        let slices = min(old.count, max(1, threads) * 8)
        let failure = Mutex<FileError?>(nil)
        same.withUnsafeMutableBufferPointer { flags in
            let shared = UncheckedSendable(flags.baseAddress!)
            DispatchQueue.concurrentPerform(iterations: slices) { slice in
                let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, largest), alignment: 64)
                defer { buffer.deallocate() }
                let range = (old.count * slice / slices)..<(old.count * (slice + 1) / slices)
                for k in range where old[k].end <= size {
                    do throws(FileError) {
                        try read(fd, into: buffer, count: Int(old[k].size), at: old[k].offset, path: path)
                    } catch {
                        failure.withLock { if $0 == nil { $0 = error } }
                        return
                    }
                    // Each slice writes only its own flags.
                    shared.value[k] = QuickSum.of(UnsafeRawBufferPointer(start: buffer, count: Int(old[k].size))) == sums[k]
                }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return same
    }

    /// Reads exactly `count` bytes at `offset` (`ChunkReader.read(at:into:)`: a file that
    /// ends earlier throws `.changedOnDisk`).
    private static func read(_ fd: Int32, into buffer: UnsafeMutableRawPointer, count: Int, at offset: UInt64,
                             path: String) throws(FileError) {
        try ChunkReader(fileDescriptor: fd, path: path).read(at: offset, into: UnsafeMutableRawBufferPointer(start: buffer, count: count))
    }
}
