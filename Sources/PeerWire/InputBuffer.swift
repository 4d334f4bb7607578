/// Bytes received but not yet decoded, with a read index so that consuming a message does not
/// shift the rest of the buffer.
///
/// `storage` is an arena: bytes `readIndex ..< end` are unread, bytes from `end` on are room
/// for the next appends, so a socket read or a decryption can write straight into it (no
/// array per append, no zeroing per append; room is zeroed once, when the arena grows).
/// Consumed bytes are dropped when the buffer is empty, or when they are at least as many as the
/// unread ones (so each byte is moved at most once on average: appends stay amortised O(1)).
struct InputBuffer {
    private(set) var storage: [UInt8] = []
    private(set) var readIndex = 0
    private var end = 0

    /// Dead bytes below this count are never compacted: moving a few bytes is not worth it.
    private static let compactionThreshold = 4 * 1024
    /// Size kept when the buffer empties; a larger one (after a big frame) is released
    /// once a small message has emptied the buffer. While large frames follow each other
    /// their arena is kept: allocating, zeroing and faulting in a fresh 1–16 MiB arena for
    /// every chunk was 2.8 % of a receiver's CPU. (Chunks and block answers no longer use
    /// it: `FrameReader` fills their data in place. Large offers, accepts and index
    /// updates still do.) What is kept is
    /// what the buffer grew to for the frames before (room for a whole frame, doubled when the
    /// next frame's first bytes came in the same message): at most about two of the largest
    /// frames allowed, which a peer could make us hold anyway without ever letting it empty.
    static let retainedCapacity = 512 * 1024
    /// The size of the last `consume`: over `retainedCapacity`, the arena stays.
    private var lastConsumed = 0

    var readableCount: Int { end - readIndex }

    mutating func append(_ bytes: some Collection<UInt8>) {
        let count = bytes.count
        makeRoom(count)
        storage.withUnsafeMutableBufferPointer { buffer in
            _ = UnsafeMutableBufferPointer(rebasing: buffer[end..<(end + count)]).initialize(fromContentsOf: bytes)
        }
        end += count
    }

    /// Appends the bytes `fill` writes into room for `maxCount` of them at the end (it
    /// returns how many it wrote, or nil to append nothing): a socket read or a decryptor
    /// writes straight into the buffer instead of into an array that is then copied.
    mutating func append(maxCount: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int?) -> Bool {
        makeRoom(maxCount)
        let start = end
        let written = storage.withUnsafeMutableBytes { raw in
            fill(UnsafeMutableRawBufferPointer(rebasing: raw[start..<(start + maxCount)]))
        }
        end += min(max(written ?? 0, 0), maxCount)
        return written != nil
    }

    /// Makes room for `count` unread bytes in all without a reallocation on the way (a
    /// large frame whose length is known would otherwise grow the buffer by doubling,
    /// copying it several times).
    mutating func reserve(unreadCount count: Int) {
        guard storage.count - readIndex < count else { return }
        grow(toHold: count)
    }

    /// Room for `count` more bytes after `end`: drops read bytes first, then grows (to
    /// twice the size at least, so that growth stays amortised).
    private mutating func makeRoom(_ count: Int) {
        compact()
        if storage.count - end < count {
            grow(toHold: max(readableCount + count, 2 * storage.count))
        }
    }

    /// A new arena of `size` bytes holding the unread bytes at its front.
    private mutating func grow(toHold size: Int) {
        var bigger = [UInt8](repeating: 0, count: size)
        let unread = readableCount
        if unread > 0 {
            bigger.withUnsafeMutableBytes { target in
                storage.withUnsafeBytes { source in
                    target.baseAddress!.copyMemory(from: source.baseAddress! + readIndex, byteCount: unread)
                }
            }
        }
        storage = bigger
        readIndex = 0
        end = unread
    }

    /// Drops the bytes already read when that is cheap enough (see the type's comment).
    private mutating func compact() {
        if readIndex == end {
            if storage.count > Self.retainedCapacity && lastConsumed <= Self.retainedCapacity { storage = [] }
            readIndex = 0
            end = 0
        } else if readIndex >= Self.compactionThreshold && readIndex >= readableCount {
            let unread = readableCount
            let from = readIndex
            storage.withUnsafeMutableBytes { raw in
                raw.baseAddress!.copyMemory(from: raw.baseAddress! + from, byteCount: unread)  // no overlap: from ≥ unread
            }
            readIndex = 0
            end = unread
        }
    }

    /// The unread byte at `offset` (0 is the next unread byte).
    func byte(at offset: Int) -> UInt8 {
        precondition(offset >= 0 && offset < readableCount)
        return storage[readIndex + offset]
    }

    /// Marks `count` unread bytes as read and returns their range in ``storage``.
    mutating func consume(_ count: Int) -> Range<Int> {
        precondition(count <= readableCount)
        lastConsumed = count
        defer { readIndex += count }
        return readIndex..<(readIndex + count)
    }

    /// Gives a large arena back when nothing is unread (a frame reader filling a frame's
    /// own array in place has no use for it meanwhile).
    mutating func releaseIfEmpty() {
        guard readIndex == end else { return }
        if storage.count > Self.retainedCapacity { storage = [] }
        lastConsumed = 0
        readIndex = 0
        end = 0
    }

    /// Drops everything (after a fatal error nothing more will be decoded).
    mutating func discardAll() {
        storage = []
        lastConsumed = 0
        readIndex = 0
        end = 0
    }
}
