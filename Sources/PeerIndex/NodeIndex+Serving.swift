/// What may be served to a folder's members: only chunks the local index holds.
extension NodeIndex {
    /// Bindings: folder, path, hash, offset, size.
    static let liveChunkQuery = """
        SELECT f.size, f.mtime_ns, f.inode FROM files f JOIN file_chunks c ON c.file_id = f.file_id
        WHERE f.folder_id = ? AND f.path = ? AND f.kind = 'file' AND f.deleted = 0
          AND c.hash = ? AND c.offset = ? AND c.size = ?
        LIMIT 1
        """

    /// What the index recorded of a file when it hashed it: a file on disk with the same
    /// size, mtime and inode is taken to hold the content the index verified.
    package struct FileStamp: Sendable, Equatable {
        package var size: Int64
        package var mtimeNs: Int64
        /// Nil when the record has none (then no file on disk matches the stamp).
        package var inode: UInt64?

        package init(size: Int64, mtimeNs: Int64, inode: UInt64?) {
            self.size = size
            self.mtimeNs = mtimeNs
            self.inode = inode
        }
    }

    /// Whether `path` is a live file in the folder's local index with a chunk of exactly
    /// this offset, size and hash: the only block a member may be sent. One indexed lookup
    /// (the file by folder and path, then its chunk by hash), however large the file.
    package func hasLiveChunk(folderID: String, path filePath: String, offset: Int64, size: Int64,
                             hash: [UInt8]) throws(IndexError) -> Bool {
        try liveChunkStamp(folderID: folderID, path: filePath, offset: offset, size: size, hash: hash) != nil
    }

    /// `hasLiveChunk`, returning the file's stamp as indexed (nil: not a chunk we share).
    package func liveChunkStamp(folderID: String, path filePath: String, offset: Int64, size: Int64,
                               hash: [UInt8]) throws(IndexError) -> FileStamp? {
        try read { db in
            let statement = try db.cachedStatement(Self.liveChunkQuery)
            try statement.bind([.text(folderID), .text(filePath), .blob(hash), .integer(offset), .integer(size)])
            defer { statement.reset() }
            guard try statement.step() else { return nil }
            let inode = statement.int64(at: 2)
            return FileStamp(size: statement.int64(at: 0) ?? -1, mtimeNs: statement.int64(at: 1) ?? 0,
                             inode: inode.map { UInt64(bitPattern: $0) })
        }
    }
}
