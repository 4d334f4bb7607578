@testable import PeerIndex
import Testing

/// How SQLite is set up for the process.
@Suite struct SQLiteConfigTests {
    /// Memory statistics are off (set before SQLite initialized: once it has, the setting is
    /// refused), and the page cache is still measured without them.
    @Test func memoryStatisticsAreOffAndTheCacheIsStillMeasured() throws {
        let index = try NodeIndex.inMemory()
        #expect(Database.memoryStatisticsOff)
        try index.addFolder(id: "docs", path: "/home/u/Documents")
        try index.upsertFiles((0..<200).map { sampleFile("docs", "f\($0)", chunkCount: 4, seed: $0) })
        #expect(try index.pageCacheBytes() > 0)
    }
}
