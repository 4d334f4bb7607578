/// What may be served to a folder's members: only chunks the local index holds.
extension NodeIndex {
    /// Bindings: folder, path, hash, offset, size.
    static let liveChunkQuery = """
        SELECT 1 FROM files f JOIN file_chunks c ON c.file_id = f.file_id
        WHERE f.folder_id = ? AND f.path = ? AND f.kind = 'file' AND f.deleted = 0
          AND c.hash = ? AND c.offset = ? AND c.size = ?
        LIMIT 1
        """

    /// Whether `path` is a live file in the folder's local index with a chunk of exactly
    /// this offset, size and hash: the only block a member may be sent. One indexed lookup
    /// (the file by folder and path, then its chunk by hash), however large the file.
    public func hasLiveChunk(folderID: String, path filePath: String, offset: Int64, size: Int64,
                             hash: [UInt8]) throws(IndexError) -> Bool {
        try read { db in
            let statement = try db.cachedStatement(Self.liveChunkQuery)
            try statement.bind([.text(folderID), .text(filePath), .blob(hash), .integer(offset), .integer(size)])
            defer { statement.reset() }
            return try statement.step()
        }
    }
}
