/// Bytes received but not yet decoded, with a read index so that consuming a message does not
/// shift the rest of the buffer.
///
/// Consumed bytes are dropped when the buffer is empty, or when they are at least as many as the
/// unread ones (so each byte is moved at most once on average: appends stay amortised O(1)).
struct InputBuffer {
    private(set) var storage: [UInt8] = []
    private(set) var readIndex = 0

    /// Dead bytes below this count are never compacted: moving a few bytes is not worth it.
    private static let compactionThreshold = 4 * 1024
    /// Capacity kept when the buffer empties; a larger buffer (after a big frame) is released.
    private static let retainedCapacity = 256 * 1024

    var readableCount: Int { storage.count - readIndex }

    mutating func append(_ bytes: some Collection<UInt8>) {
        if readIndex == storage.count {
            storage.removeAll(keepingCapacity: storage.capacity <= Self.retainedCapacity)
            readIndex = 0
        } else if readIndex >= Self.compactionThreshold && readIndex >= readableCount {
            storage.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// The unread byte at `offset` (0 is the next unread byte).
    func byte(at offset: Int) -> UInt8 {
        storage[readIndex + offset]
    }

    /// Marks `count` unread bytes as read and returns their range in ``storage``.
    mutating func consume(_ count: Int) -> Range<Int> {
        precondition(count <= readableCount)
        defer { readIndex += count }
        return readIndex..<(readIndex + count)
    }

    /// Drops everything (after a fatal error nothing more will be decoded).
    mutating func discardAll() {
        storage = []
        readIndex = 0
    }
}
