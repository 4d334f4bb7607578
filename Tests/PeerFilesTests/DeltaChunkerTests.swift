import Foundation
import Glibc
import PeerFiles
import Testing

/// A file changed after it was chunked is re-chunked from its old manifest and the quick
/// sums of its chunks: the result is exactly the whole file's chunking now, and only
/// what changed is hashed again.
@Suite struct DeltaChunkerTests {
    static let size = 6 << 20   // 64 KiB chunks: about 96 of them

    /// The chunks and quick sums of the whole file, as a full scan makes them.
    static func full(_ path: String) throws -> (Manifest, [QuickSum]) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        var st = stat()
        _ = fstat(fd, &st)
        let chunker = FileChunker(fileDescriptor: fd, parameters: ChunkParameters.forFileSize(UInt64(st.st_size)), quickSums: true)
        let chunks = try chunker.allChunks()
        return (try Manifest(fileSize: UInt64(st.st_size), chunks: chunks), chunker.sums)
    }

    static func delta(_ path: String, from manifest: Manifest, sums: [QuickSum]) throws -> DeltaChunker.Result? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        var st = stat()
        _ = fstat(fd, &st)
        return try DeltaChunker.rechunk(fileDescriptor: fd, path: path, size: UInt64(st.st_size), previous: manifest, sums: sums)
    }

    enum Edit: CaseIterable {
        case none, middle, start, end, append, truncate, insert, wholeFile
    }

    static func apply(_ edit: Edit, to bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        let patch = pseudoRandomBytes(count: 100_000, seed: 99)
        switch edit {
        case .none: break
        case .middle: b.replaceSubrange(3_000_000..<3_100_000, with: patch)
        case .start: b.replaceSubrange(0..<100_000, with: patch)
        case .end: b.replaceSubrange((b.count - 100_000)..<b.count, with: patch)
        case .append: b += patch
        case .truncate: b.removeLast(150_000)
        case .insert: b.insert(contentsOf: patch[0..<777], at: 2_000_000)
        case .wholeFile: b = pseudoRandomBytes(count: b.count, seed: 7)
        }
        return b
    }

    @Test(arguments: Edit.allCases)
    func theResultIsTheWholeFilesChunking(_ edit: Edit) throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/big.bin"
            let original = pseudoRandomBytes(count: Self.size, seed: 1)
            try writeFile(path, original)
            let (before, sums) = try Self.full(path)
            try writeFile(path, Self.apply(edit, to: original))
            let (expected, expectedSums) = try Self.full(path)
            let result = try #require(try Self.delta(path, from: before, sums: sums))
            #expect(result.chunks == expected.chunks, "\(edit): the chunks of a whole-file chunking")
            #expect(result.sums == expectedSums, "\(edit): the quick sums of those chunks")
            switch edit {
            case .none:
                #expect(result.bytesHashed == 0, "nothing changed, nothing hashed")
            case .middle, .start, .end, .truncate:
                // The edited 100 KB and the chunks around it, not the 6 MiB.
                #expect(result.bytesHashed < 1 << 20, "\(edit): \(result.bytesHashed) bytes hashed again")
            case .append, .insert, .wholeFile:
                break   // shifted or new: hashed again from the edit on (still correct)
            }
        }
    }

    @Test func sumsThatDoNotMatchMeanEverythingIsHashedAgain() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/big.bin"
            try writeFile(path, pseudoRandomBytes(count: Self.size, seed: 2))
            let (manifest, sums) = try Self.full(path)
            let wrong = sums.map { QuickSum(low: $0.low ^ 1, high: $0.high) }
            let result = try #require(try Self.delta(path, from: manifest, sums: wrong))
            #expect(result.chunks == manifest.chunks)
            #expect(result.bytesHashed == UInt64(Self.size))
            // Sums of another manifest (another chunk count) are refused.
            #expect(try Self.delta(path, from: manifest, sums: Array(sums.dropLast())) == nil)
        }
    }

    /// A scanner with a sum cache re-chunks a large changed file from its known manifest and
    /// reports the same manifest as a scan without one.
    @Test func aScannerWithSumsReportsTheSameManifest() throws {
        try withTemporaryDirectory { dir in
            let root = dir + "/folder"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let path = root + "/big.bin"
            var bytes = pseudoRandomBytes(count: Int(ChunkSumCache.minimumFileSize) + 3_000_000, seed: 3)
            try writeFile(path, bytes)
            var scanner = FolderScanner(root: root)
            let cache = ChunkSumCache()
            scanner.chunkSums = cache
            var known = KnownEntryList()
            try scanner.scan(known: known) { known.apply($0) }
            #expect(cache.count == 1, "the large file's sums are kept")
            bytes.replaceSubrange(9_000_000..<9_500_000, with: pseudoRandomBytes(count: 500_000, seed: 4))
            try writeFile(path, bytes)
            var changed: [ScannedEntry] = []
            let summary = try scanner.scan(known: known) { changed += $0.changed }
            let (expected, _) = try Self.full(path)
            #expect(changed.count == 1 && changed.first?.manifest == expected, "the manifest of a whole-file chunking")
            #expect(summary.bytesRead >= UInt64(bytes.count), "every old chunk was compared")
        }
    }
}
