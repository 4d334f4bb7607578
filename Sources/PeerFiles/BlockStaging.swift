/// The buffer a session reads a block answer into before it is sent (`Session.sendBlockFromAnyThread`):
/// the block is read from the file into it once, hashed there, and encrypted straight from it,
/// so every byte sent is one that was hashed. Used on the session's `sendQueue` only, one
/// answer at a time; kept while answers follow each other (no allocation per block), let go
/// once the queue is empty, so an idle session holds none. Its size is at most one block
/// (16 MiB), counted in the session's flow as the answer queued.
/// (@unchecked Sendable: raw memory, confined to the session's `sendQueue` by its user.)
package final class BlockStaging: @unchecked Sendable {
    package init() {}

    private var buffer: UnsafeMutableRawBufferPointer?

    /// A buffer of exactly `count` bytes (its contents undefined), valid until `release`
    /// or the next call.
    package func take(_ count: Int) -> UnsafeMutableRawBufferPointer {
        if let buffer, buffer.count >= count { return UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]) }
        release()
        let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 64)
        buffer = grown
        return UnsafeMutableRawBufferPointer(rebasing: grown[0..<count])
    }

    package func release() {
        buffer?.deallocate()
        buffer = nil
    }

    deinit { release() }
}
