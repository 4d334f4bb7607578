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
        compact()
        storage.append(contentsOf: bytes)
    }

    /// Appends the bytes `fill` writes into room for `maxCount` of them at the end (it
    /// returns how many it wrote, or nil to append nothing): a decryptor writes straight
    /// into the buffer instead of into an array that is then copied.
    mutating func append(maxCount: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int?) -> Bool {
        compact()
        let start = storage.count
        var zerosLeft = maxCount  // room to write into, zeroed by memcpy of a zero block
        while zerosLeft > 0 {
            let piece = min(zerosLeft, Self.zeros.count)
            storage.append(contentsOf: Self.zeros[0..<piece])
            zerosLeft -= piece
        }
        let written = storage.withUnsafeMutableBytes { raw in
            fill(UnsafeMutableRawBufferPointer(rebasing: raw[start..<(start + maxCount)]))
        }
        storage.removeLast(maxCount - min(written ?? 0, maxCount))
        return written != nil
    }

    /// Makes room for `count` unread bytes in all without a reallocation on the way (a
    /// large frame whose length is known would otherwise grow the buffer by doubling,
    /// copying it several times). Moves the unread bytes to the front first.
    mutating func reserve(unreadCount count: Int) {
        guard storage.capacity - readIndex < count else { return }
        if readIndex > 0 {
            storage.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        storage.reserveCapacity(count)
    }

    private static let zeros = [UInt8](repeating: 0, count: 64 * 1024)

    /// Drops the bytes already read when that is cheap enough (see the type's comment).
    private mutating func compact() {
        if readIndex == storage.count {
            storage.removeAll(keepingCapacity: storage.capacity <= Self.retainedCapacity)
            readIndex = 0
        } else if readIndex >= Self.compactionThreshold && readIndex >= readableCount {
            storage.removeSubrange(0..<readIndex)
            readIndex = 0
        }
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
