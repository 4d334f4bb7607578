import PeerModel
import Foundation
import PeerIndex
import Testing

/// The index's page cache, which an idle daemon hands back (issue 43, point 5).
@Suite struct IndexMemoryTests {
    /// After reading a few MiB of files, the cache holds them; `releaseMemory` frees them,
    /// and the index still answers (from the file) afterwards.
    @Test func releaseMemoryEmptiesThePageCache() throws {
        try withTemporaryDirectory { dir in
            let index = try NodeIndex.open(at: dir.appendingPathComponent("index.db").path, clock: fixedClock)
            try index.addFolder(id: "big", path: "/data/big")
            let me = deviceID(1)
            let records = (0..<20_000).map { i in
                FileRecord(folderID: "big", FileEntry(path: "d\(i % 100)/file\(i).txt", kind: .file, size: 4_096, mtimeNs: 1_700_000_000_000_000_000 + Int64(i), mode: 0o644, version: [me: 1], rootHash: hash32(i), modifiedBy: me), inode: UInt64(i), chunks: [FileChunkRecord(offset: 0, size: 4_096, hash: hash32(i &* 7))])
            }
            _ = try index.upsertFiles(records)
            #expect(try index.file(folderID: "big", path: "d7/file19907.txt") != nil)
            let filled = try index.pageCacheBytes()
            #expect(filled > 2 << 20)

            index.releaseMemory()
            #expect(try index.pageCacheBytes() < filled / 8)
            #expect(try index.file(folderID: "big", path: "d7/file19907.txt")?.size == 4_096)
        }
    }
}
