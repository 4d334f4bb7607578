import Foundation
@testable import PeerFiles
import Testing

/// How a scan cuts what it finds into batches (each one transaction for the index).
@Suite struct ScanBatchSizeTests {
    private func batches(_ scanner: FolderScanner) throws -> [ScanBatch] {
        var batches: [ScanBatch] = []
        try scanner.scan(known: KnownEntryList()) { batches.append($0) }
        return batches
    }

    /// The first batch holds `batchSize` items, each next one twice the last, up to
    /// `maxBatchSize`; without a ceiling every batch holds `batchSize`.
    @Test func batchesDoubleUpToTheCeiling() throws {
        try withTemporaryDirectory { dir in
            for i in 0..<30 { try Tree.write(dir + "/f\(i)", "\(i)") }
            var scanner = FolderScanner(root: dir, batchSize: 2)
            #expect(try batches(scanner).map(\.count) == Array(repeating: 2, count: 15))
            scanner.maxBatchSize = 8
            let grown = try batches(scanner)
            #expect(grown.map(\.count) == [2, 4, 8, 8, 8])
            #expect(Set(grown.flatMap(\.added).map(\.path)) == Set((0..<30).map { "f\($0)" }))
        }
    }

    /// A batch is full once its manifests hold `maxBatchChunks` chunks, whatever its count.
    @Test func aBatchEndsAtItsChunkLimit() throws {
        try withTemporaryDirectory { dir in
            let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
            defer { try? random.close() }
            for i in 0..<6 { try writeFile(dir + "/big\(i)", Array(random.readData(ofLength: 1 << 20))) }
            var scanner = FolderScanner(root: dir, batchSize: 100)
            scanner.maxBatchChunks = 20
            let found = try batches(scanner)
            let chunks = found.map { $0.added.map { $0.manifest?.chunks.count ?? 0 } }
            #expect(chunks.joined().count == 6 && chunks.joined().allSatisfy { $0 > 1 })
            #expect(found.count > 1)
            // Each batch but the last reached the limit with its last file, not before.
            for batch in chunks.dropLast() {
                #expect(batch.reduce(0, +) >= 20 && batch.dropLast().reduce(0, +) < 20)
            }
        }
    }
}
