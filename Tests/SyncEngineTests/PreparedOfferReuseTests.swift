import Foundation
import PeerFiles
import PeerWire
import Testing
@testable import SyncEngine

/// `send` of a file a shared folder has indexed reuses the index's manifest (no second read
/// and hash of the file); anything the index cannot vouch for is chunked afresh.
struct PreparedOfferReuseTests {
    static func makeFile(_ bytes: Int) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("offer-reuse-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("data.bin").path
        var generator = SystemRandomNumberGenerator()
        let data = Data((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The index's manifest is offered as is, for the stamp (size, mtime, inode) of the file
    /// as it is now. (A manifest cut with other parameters stands in for "the index's", so
    /// that it differs from what chunking the file again would give.)
    @Test func indexedManifestIsOfferedWithoutChunkingAgain() throws {
        let path = try Self.makeFile(300_000)
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path) }
        let fresh = try FileChunker.manifest(ofFileAt: path)
        let indexed = try FileChunker.manifest(ofFileAt: path, parameters: ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384))
        #expect(indexed.chunks.count > fresh.chunks.count)
        var asked: [(String, PreparedOffer.FileStamp)] = []
        let offer = try PreparedOffer.build(path: path, name: nil, kind: .file, indexed: { file, stamp in
            asked.append((file, stamp))
            return indexed
        })
        #expect(offer.sources.map(\.manifest) == [indexed])
        let stamp = try #require(PreparedOffer.FileStamp(path: path))
        #expect(asked.count == 1 && asked.first?.0 == path && asked.first?.1 == stamp)
        #expect(offer.layout.chunkCount == indexed.chunks.count)
    }

    /// No manifest from the index (the file changed since it was indexed, or lies in no
    /// shared folder), or one of another size: the file is chunked as before.
    @Test func withoutAMatchingIndexedManifestTheFileIsChunked() throws {
        let path = try Self.makeFile(200_000)
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path) }
        let fresh = try FileChunker.manifest(ofFileAt: path)
        let none = try PreparedOffer.build(path: path, name: nil, kind: .file, indexed: { _, _ in nil })
        #expect(none.sources.map(\.manifest) == [fresh])
        let other = try Self.makeFile(100_000)
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: other).deletingLastPathComponent().path) }
        let wrongSize = try FileChunker.manifest(ofFileAt: other)
        let refused = try PreparedOffer.build(path: path, name: nil, kind: .file, indexed: { _, _ in wrongSize })
        #expect(refused.sources.map(\.manifest) == [fresh])
    }
}
