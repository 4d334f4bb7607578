/// What the scanner says of a large file while it hashes it (`FolderScanner.onGrowing`), so
/// that peers may fetch its first chunks before its index entry exists.
package enum GrowingFileEvent: Sendable {
    /// Chunks cut and hashed so far (in order, each following the one before) of the file at
    /// `path`, whose size, mtime and inode were `stamp` when its hashing (`scan`) started.
    case chunks(path: String, scan: UInt64, stamp: Stamp, chunks: [ChunkRef])
    /// That hashing ended without an entry: the file changed under it, vanished or could not
    /// be read. What was said of it is void.
    case abandoned(path: String, scan: UInt64)

    /// A file's size, mtime and inode.
    package struct Stamp: Sendable, Hashable {
        package var size: UInt64
        package var mtimeNs: Int64
        package var inode: UInt64

        package init(size: UInt64, mtimeNs: Int64, inode: UInt64) {
            (self.size, self.mtimeNs, self.inode) = (size, mtimeNs, inode)
        }
    }

    /// Chunks are handed over in batches of at least this many bytes (and the rest at the end).
    package static let batchBytes: UInt64 = 4 << 20
    /// And at most this many chunks in one (a frame's worth).
    package static let batchChunks = 1_024
}
