import PeerModel
import Foundation
@testable import PeerIndex
import Testing

/// `hasLiveChunk`: what a folder member may be sent is exactly a chunk of a live file of the
/// local index, as the index holds it.
@Suite struct ServedChunkTests {
    func index() throws -> NodeIndex {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        try index.addFolder(id: "docs", path: "/home/u/Documents", label: "Documents")
        try index.addFolder(id: "pics", path: "/home/u/Pictures")
        var gone = sampleFile("docs", "gone.txt", seed: 2)
        gone.deleted = true
        gone.chunks = []
        try index.upsertFiles([sampleFile("docs", "a/report.txt", chunkCount: 3, seed: 1), gone,
                               FileRecord(folderID: "docs", FileEntry(path: "a", kind: .directory, mtimeNs: 0, mode: 0o755, version: [deviceID(1): 1], modifiedBy: deviceID(1)))])
        return index
    }

    @Test func everyChunkOfALiveFileIsServable() throws {
        let index = try index()
        for n in 0..<3 {
            #expect(try index.hasLiveChunk(folderID: "docs", path: "a/report.txt", offset: Int64(n) * 1_000, size: 1_000,
                                           hash: hash32(1_000 + n)))
        }
    }

    struct Probe: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let folder: String, path: String, offset: Int64, size: Int64, hash: [UInt8]
    }

    @Test(arguments: [
        Probe(testDescription: "another chunk's offset", folder: "docs", path: "a/report.txt", offset: 1_000, size: 1_000, hash: hash32(1_000)),
        Probe(testDescription: "a range inside a chunk", folder: "docs", path: "a/report.txt", offset: 0, size: 1, hash: hash32(1_000)),
        Probe(testDescription: "an unaligned range", folder: "docs", path: "a/report.txt", offset: 1, size: 1_000, hash: hash32(1_000)),
        Probe(testDescription: "an unknown hash", folder: "docs", path: "a/report.txt", offset: 0, size: 1_000, hash: hash32(42)),
        Probe(testDescription: "an unknown path", folder: "docs", path: "secret.txt", offset: 0, size: 1_000, hash: hash32(1_000)),
        Probe(testDescription: "the same file in another folder", folder: "pics", path: "a/report.txt", offset: 0, size: 1_000, hash: hash32(1_000)),
        Probe(testDescription: "a deleted file's old chunk", folder: "docs", path: "gone.txt", offset: 0, size: 1_000, hash: hash32(2_000)),
        Probe(testDescription: "a directory", folder: "docs", path: "a", offset: 0, size: 1_000, hash: hash32(1_000)),
    ])
    func anythingElseIsNot(_ probe: Probe) throws {
        let index = try index()
        #expect(try !index.hasLiveChunk(folderID: probe.folder, path: probe.path, offset: probe.offset, size: probe.size,
                                        hash: probe.hash))
    }

    @Test func aChangedFileServesOnlyItsNewChunks() throws {
        let index = try index()
        try index.upsertFiles([sampleFile("docs", "a/report.txt", chunkCount: 1, seed: 9)])
        #expect(try !index.hasLiveChunk(folderID: "docs", path: "a/report.txt", offset: 0, size: 1_000, hash: hash32(1_000)))
        #expect(try index.hasLiveChunk(folderID: "docs", path: "a/report.txt", offset: 0, size: 1_000, hash: hash32(9_000)))
    }

    /// One indexed lookup: the file by (folder, path), its chunk by (hash, file): no scan
    /// of a large file's chunk list.
    @Test func theLookupUsesIndexesOnly() throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("index.db").path
            _ = try NodeIndex.open(at: path, clock: fixedClock)
            let db = try Database.open(path: path)
            let plan = try db.query("EXPLAIN QUERY PLAN " + NodeIndex.liveChunkQuery,
                                    [.text("docs"), .text("x"), .blob(hash32(1)), .integer(0), .integer(1)])
            let details = try plan.map { try $0.string("detail") }
            #expect(details.count == 2, "\(details)")
            #expect(details.allSatisfy { $0.hasPrefix("SEARCH") }, "\(details)")
            #expect(details.contains { $0.contains("file_chunks_by_hash (hash=? AND file_id=?)") }, "\(details)")
        }
    }
}
