import PeerModel
@testable import PeerIndex
import Testing

/// The chunk lists `upsertFiles` stores: a new row's list is cleared first only when chunks
/// could be stored under its ID already.
@Suite struct FileChunkRowsTests {
    /// The chunk rows stored under `fileID`, by index.
    private func chunkRows(_ index: NodeIndex, fileID: Int64) throws -> [Int64] {
        var rows: [Int64] = []
        try withRawDatabase(index) { (db: Database) throws in
            rows = try db.query("SELECT chunk_index FROM file_chunks WHERE file_id = ? ORDER BY chunk_index",
                                [.integer(fileID)]).map { try $0.int64("chunk_index") }
        }
        return rows
    }

    private func fileID(_ index: NodeIndex, _ path: String) throws -> Int64? {
        var id: Int64?
        try withRawDatabase(index) { (db: Database) throws in
            id = try db.query("SELECT file_id FROM files WHERE path = ?", [.text(path)]).first?.int64("file_id")
        }
        return id
    }

    /// A row deleted by a tool that does not enforce foreign keys (the sqlite3 shell) leaves
    /// its chunks under its ID; SQLite gives that ID to the next new row, which must get
    /// only its own chunks. Rows added above it, and replaced rows, hold their own lists.
    @Test func aNewRowNeverInheritsChunksLeftUnderItsID() throws {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        try index.addFolder(id: "docs", path: "/home/u/Documents")
        try index.upsertFiles([sampleFile("docs", "a", chunkCount: 2, seed: 1), sampleFile("docs", "b", chunkCount: 5, seed: 2)])
        let lost = try #require(try fileID(index, "b"))
        try withRawDatabase(index) { (db: Database) throws in
            try db.execute("PRAGMA foreign_keys = OFF")
            try db.execute("DELETE FROM files WHERE path = 'b'")
            try db.execute("PRAGMA foreign_keys = ON")
        }
        #expect(try chunkRows(index, fileID: lost) == [0, 1, 2, 3, 4])

        let stored = try index.upsertFiles([sampleFile("docs", "c", chunkCount: 1, seed: 3),
                                            sampleFile("docs", "d", chunkCount: 3, seed: 4),
                                            sampleFile("docs", "a", chunkCount: 1, seed: 5, counter: 2)])
        #expect(try fileID(index, "c") == lost)
        #expect(try chunkRows(index, fileID: lost) == [0])
        for record in stored {
            #expect(try index.file(folderID: "docs", path: record.path)?.chunks == record.chunks)
        }
        #expect(try index.file(folderID: "docs", path: "a")?.chunks.count == 1)
    }
}
