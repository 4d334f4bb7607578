import PeerFiles
import Testing
@testable import SyncEngine

/// The numbering of an offer's chunks, and how a streamed manifest grows it: the pure rules
/// a receiver applies to chunks that name their own hash.
struct ChunkLayoutTests {
    static func hash(_ n: Int) -> ChunkHash { ChunkHash.of([UInt8(n & 0xFF), UInt8(n >> 8)]) }

    static func manifest(_ sizes: [UInt32], seed: Int) throws -> Manifest {
        var offset: UInt64 = 0
        let chunks = sizes.enumerated().map { i, size in
            defer { offset += UInt64(size) }
            return ChunkRef(offset: offset, size: size, hash: hash(seed + i))
        }
        return try Manifest(fileSize: offset, chunks: chunks)
    }

    /// A file of 1 MiB is cut into 16 KiB … 256 KiB chunks (`ChunkParameters.forFileSize`).
    static let streamedSize: UInt64 = 1 << 20

    @Test func aStreamedEntryGrowsChunkByChunkAfterTheOfferedOnes() throws {
        let first = try Self.manifest([100, 200], seed: 0)
        var layout = ChunkLayout(manifests: [first], streamedSizes: [Self.streamedSize, 200_000])
        #expect(layout.offeredChunkCount == 2 && layout.chunkCount == 2 && layout.streamingEntry == 1)
        #expect(!layout.isComplete && layout.isStreamed && layout.manifest(of: 1) == nil)
        #expect(layout.range(of: 1) == 2..<2 && layout.range(of: 2) == 2..<2)
        // Entry 1: four chunks of 256 KiB; the last completes it.
        for i in 0..<4 {
            let completed = try layout.extend(size: 262_144, hash: Self.hash(10 + i))
            #expect(completed == (i == 3 ? 1 : nil))
            #expect(layout.locate(2 + i)?.entry == 1 && layout.locate(2 + i)?.chunk.offset == UInt64(i) * 262_144)
        }
        #expect(layout.manifest(of: 1)?.fileSize == Self.streamedSize && layout.streamingEntry == 2)
        #expect(layout.range(of: 1) == 2..<6 && layout.firstChunk == [0, 2, 6])
        // Entry 2 (200,000 bytes: a single chunk may be all of it).
        #expect(try layout.extend(size: 200_000, hash: Self.hash(20)) == 2)
        #expect(layout.isComplete && layout.chunkCount == 7 && layout.locate(6)?.entry == 2)
        #expect(layout.chunkSizes(from: 5) == [262_144, 200_000])
        #expect(layout.transferChunks(from: 6).map(\.index) == [6])
        #expect(layout.chunks().map(\.size) == [100, 200, 262_144, 262_144, 262_144, 262_144, 200_000])
        #expect(throws: ChunkLayout.ExtendError.complete) { try layout.extend(size: 1, hash: Self.hash(0)) }
    }

    /// Every chunk but an entry's last is as large as FastCDC makes them for the entry's
    /// size, none is larger, and none runs past the entry's end: so an entry holds at most
    /// `mostChunks` chunks, whatever a peer sends.
    @Test(arguments: [(0, true), (1, false), (16_384, true), (16_383, false), (262_144, true), (262_145, false)])
    func aChunkMustHaveASizeFastCDCGives(size: Int, allowed: Bool) throws {
        var layout = ChunkLayout(manifests: [], streamedSizes: [Self.streamedSize])
        var extended = true
        do { try layout.extend(size: UInt32(size), hash: Self.hash(1)) } catch { extended = false }
        #expect(extended == (allowed && size > 0), "size \(size)")
    }

    @Test func theLastChunkMayBeSmallButNotPastTheEnd() throws {
        var layout = ChunkLayout(manifests: [], streamedSizes: [Self.streamedSize])
        for _ in 0..<3 { try layout.extend(size: 262_144, hash: Self.hash(1)) }
        #expect(throws: ChunkLayout.ExtendError.pastEnd(entry: 0)) { try layout.extend(size: 262_145, hash: Self.hash(2)) }
        try layout.extend(size: 262_143, hash: Self.hash(3))
        #expect(throws: ChunkLayout.ExtendError.size(0, entry: 0, allowed: 16_384...262_144)) { try layout.extend(size: 0, hash: Self.hash(2)) }
        #expect(try layout.extend(size: 1, hash: Self.hash(4)) == 0)
        #expect(layout.isComplete && layout.chunkCount == 5)
        #expect(ChunkLayout.mostChunks(streamedSize: Self.streamedSize) == 65)
    }

    /// A layout with every manifest is not streamed, and numbers chunks entry by entry,
    /// skipping empty files.
    @Test func aWholeOfferIsNumberedEntryByEntry() throws {
        let layout = ChunkLayout(manifests: [try Self.manifest([5], seed: 0), try Self.manifest([], seed: 0),
                                             try Self.manifest([7, 8], seed: 5)])
        #expect(layout.isComplete && !layout.isStreamed && layout.chunkCount == 3 && layout.offeredChunkCount == 3)
        #expect(layout.locate(1)?.entry == 2 && layout.locate(1)?.chunk.size == 7 && layout.locate(3) == nil)
        #expect(layout.range(of: 1) == 1..<1 && layout.totalSize == 20)
    }
}
