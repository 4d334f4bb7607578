/// Read buffers that `FileChunker`s of one thread take in turn: a scan of 50,000 small files
/// (D) allocated two fresh buffers of ≥ 320 KiB per file, and faulting their pages in again
/// each time was 3.6 % of the sender's CPU.
///
/// (How much that costs depends on malloc: once a freed buffer has raised glibc's mmap
/// threshold, later ones come from the heap and their pages stay. In a test process 5,000
/// files of 1–61 KiB scanned in 0.44 CPU-s with and without the pool, with 0–118 minor
/// faults either way; the pool makes the cost not depend on that heuristic.)
///
/// Buffers up to `largestPooled` bytes are kept when given back (at most `keptBuffers` of
/// them); larger ones are freed as before. Sizes are rounded up to a power of two so that a
/// run of growing files reallocates a few times only. Not thread-safe: one pool per thread
/// (a scan's), and the chunkers that use it live on that thread.
package final class ChunkBuffers {
    private var free: [(pointer: UnsafeMutableRawPointer, capacity: Int)] = []
    /// Buffers allocated by `take` so far (for tests).
    package private(set) var allocated = 0

    /// The largest buffer kept for reuse: a 4 MiB file's (the largest that is read, not
    /// mapped) with its chunk parameters' `maxSize`.
    package static let largestPooled = 8 << 20
    /// Buffers kept: a chunker that reads ahead holds three.
    package static let keptBuffers = 3
    static let alignment = 64

    package init() {}

    deinit {
        for buffer in free { buffer.pointer.deallocate() }
    }

    /// A buffer of at least `count` bytes (its contents undefined), and its capacity.
    func take(_ count: Int) -> (pointer: UnsafeMutableRawPointer, capacity: Int) {
        if let at = free.firstIndex(where: { $0.capacity >= count }) { return free.remove(at: at) }
        var capacity = max(count, 1)
        if capacity <= Self.largestPooled { capacity = min(Self.largestPooled, 1 << (Int.bitWidth - (capacity - 1).leadingZeroBitCount)) }
        capacity = max(capacity, count)
        allocated += 1
        return (UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: Self.alignment), capacity)
    }

    /// Gives back a buffer from `take`: kept for the next chunker, or freed.
    func giveBack(_ buffer: (pointer: UnsafeMutableRawPointer, capacity: Int)) {
        guard buffer.capacity <= Self.largestPooled else { return buffer.pointer.deallocate() }
        free.append(buffer)
        if free.count > Self.keptBuffers {
            // The smallest goes: the larger ones serve every size.
            let smallest = free.indices.min { free[$0].capacity < free[$1].capacity }!
            free.remove(at: smallest).pointer.deallocate()
        }
    }
}
