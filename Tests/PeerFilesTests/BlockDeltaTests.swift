import PeerCrypto
import PeerFiles
import TestKit
import Testing

/// The in-place delta of one chunk (`BlockDelta`): the asker's sums, the server's answer and
/// the asker's rebuild, for every set of changed blocks of short chunks, and every malformed
/// answer the asker must refuse.
@Suite struct BlockDeltaTests {
    static let block = BlockDelta.blockSize

    static func random(_ count: Int, seed: UInt64) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        return rng.bytes(count)
    }

    @Test func sumsAreTheFirstEightBytesOfBLAKE3OfEachBlock() {
        let data = Self.random(2 * Self.block + 5, seed: 1)
        let sums = BlockDelta.sums(data)
        #expect(sums.count == 3 * 8 && BlockDelta.blockCount(size: data.count) == 3)
        #expect(Array(sums[0..<8]) == Array(BLAKE3.hash(Array(data[0..<Self.block]))[0..<8]))
        #expect(Array(sums[8..<16]) == Array(BLAKE3.hash(Array(data[Self.block..<2 * Self.block]))[0..<8]))
        #expect(Array(sums[16..<24]) == Array(BLAKE3.hash(Array(data[(2 * Self.block)...]))[0..<8]))
        #expect(BlockDelta.bitmapSize(size: 8 * Self.block) == 1 && BlockDelta.bitmapSize(size: 8 * Self.block + 1) == 2)
    }

    /// Every subset of changed blocks, for chunks of 2 … 9 blocks, whole or with a short last
    /// block: the answer carries exactly the changed blocks, and the rebuild is the chunk.
    @Test func everySetOfChangedBlocksIsRebuiltFromTheAnswer() throws {
        for blocks in 2...9 {
            for size in [blocks * Self.block, blocks * Self.block - 5] {
                let chunk = Self.random(size, seed: UInt64(size))
                for changed in 0..<(1 << blocks) {
                    var own = chunk
                    var carried = 0
                    for block in 0..<blocks where changed & (1 << block) != 0 {
                        // One byte differs in each changed block (the first, last or a middle one).
                        let at = block * Self.block + [0, Self.block / 2, Self.block - 1][block % 3]
                        own[min(at, size - 1)] ^= 0x5A
                        carried += min(size, (block + 1) * Self.block) - block * Self.block
                    }
                    let answer = try #require(BlockDelta.answer(chunk: chunk, sums: BlockDelta.sums(own)))
                    #expect(answer.count == BlockDelta.bitmapSize(size: size) + carried)
                    #expect(answer.count <= size + BlockDelta.bitmapSize(size: size))
                    var rebuilt = own
                    #expect(BlockDelta.apply(answer, to: &rebuilt) == carried)
                    #expect(rebuilt == chunk, "\(blocks) blocks of \(size) bytes, changed \(changed)")
                }
            }
        }
    }

    /// The server streams its answer from the file in pieces of any size (the channel asks
    /// for what fits its buffer): every cut gives the same bytes as the answer built whole,
    /// and summing the chunk piece by piece gives the same sums.
    @Test func anAnswerStreamedInPiecesIsTheAnswer() throws {
        let size = 70 * Self.block + 1_234
        let chunk = Self.random(size, seed: 8)
        var own = chunk
        for at in [0, 5 * Self.block + 7, 40 * Self.block - 1, 63 * Self.block, 64 * Self.block, size - 1] { own[at] ^= 0x11 }
        let theirs = BlockDelta.sums(own)
        var offsets: [Int] = []
        let ours = BlockDelta.sums(size: size) { (offset: Int, buffer: UnsafeMutableRawBufferPointer) in
            offsets.append(offset)
            chunk.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + buffer.count])) }
        }
        #expect(ours == BlockDelta.sums(chunk) && offsets == [0, 64 * Self.block], "1 MiB at a time")
        let differences = try #require(BlockDelta.differences(ours: ours, theirs: theirs, size: size))
        #expect(differences.blocks == [0, 5, 39, 63, 64, 70])
        let whole = try #require(BlockDelta.answer(chunk: chunk, sums: theirs))
        #expect(differences.answerSize == whole.count)
        for step in [1, 7, 9, 1_000, Self.block, Self.block + 1, 65_519, whole.count] {
            var streamed: [UInt8] = []
            var offset = 0
            while offset < differences.answerSize {
                let count = min(step, differences.answerSize - offset)
                let pieces = differences.pieces(from: offset, count: count)
                #expect(pieces.reduce(0) { $0 + $1.length } == count)
                for piece in pieces {
                    switch piece {
                    case let .bitmap(range): streamed += differences.bitmap[range]
                    case let .chunk(start, length): streamed += chunk[start..<start + length]
                    }
                }
                offset += count
            }
            #expect(streamed == whole, "pieces of \(step) bytes")
        }
        #expect(BlockDelta.differences(ours: ours, theirs: Array(theirs.dropLast(8)), size: size) == nil)
    }

    /// A shifted base (bytes inserted before the chunk) matches no block: the answer is the
    /// whole chunk and a full bitmap, and the rebuild still holds.
    @Test func aShiftedBaseGetsTheWholeChunk() throws {
        let chunk = Self.random(5 * Self.block + 100, seed: 9)
        let own = [UInt8](repeating: 1, count: 7) + chunk.dropLast(7)
        let answer = try #require(BlockDelta.answer(chunk: chunk, sums: BlockDelta.sums(own)))
        #expect(Array(answer[0..<1]) == [0b0011_1111] && answer.count == 1 + chunk.count)
        var rebuilt = own
        #expect(BlockDelta.apply(answer, to: &rebuilt) == chunk.count && rebuilt == chunk)
    }

    @Test func sumsOfAnotherCountGetNoAnswer() {
        let chunk = Self.random(3 * Self.block, seed: 3)
        let sums = BlockDelta.sums(chunk)
        #expect(BlockDelta.answer(chunk: chunk, sums: Array(sums.dropLast(8))) == nil)
        #expect(BlockDelta.answer(chunk: chunk, sums: sums + [UInt8](repeating: 0, count: 8)) == nil)
        #expect(BlockDelta.answer(chunk: chunk, sums: Array(sums.dropLast(1))) == nil)
        #expect(BlockDelta.answer(chunk: chunk, sums: []) == nil)
    }

    /// Answers that do not fit the chunk's size are refused, and the base is left as it was.
    @Test func malformedAnswersAreRefusedAndLeaveTheBaseAlone() throws {
        let size = 10 * Self.block - 3   // two bitmap bytes, the second one using two bits
        let chunk = Self.random(size, seed: 4)
        var own = chunk
        own[3 * Self.block] ^= 1
        own[size - 1] ^= 1
        let good = try #require(BlockDelta.answer(chunk: chunk, sums: BlockDelta.sums(own)))
        #expect(good.count == 2 + Self.block + (Self.block - 3))
        var highBit = good
        highBit[1] |= 0b100   // block 10 does not exist
        var noBits = good
        noBits[0] = 0
        noBits[1] = 0
        let bad: [(String, [UInt8])] = [
            ("empty", []),
            ("bitmap only", Array(good[0..<2])),
            ("short bitmap", [good[0]]),
            ("one byte short", Array(good.dropLast())),
            ("one byte long", good + [0]),
            ("a bit past the last block", highBit),
            ("no bit set, data following", noBits),
        ]
        for (what, answer) in bad {
            var base = own
            #expect(BlockDelta.apply(answer, to: &base) == nil, "\(what)")
            #expect(base == own, "\(what): the base is untouched")
        }
        var base = own
        #expect(BlockDelta.apply(good, to: &base) == good.count - 2 && base == chunk)
    }

    /// An answer well formed for the size but carrying other bytes is rebuilt as told; the
    /// asker's hash check of the whole chunk is what refuses it.
    @Test func aLyingAnswerRebuildsSomethingElseThatTheHashRefuses() throws {
        let chunk = Self.random(4 * Self.block, seed: 5)
        var own = chunk
        own[Self.block + 1] ^= 1
        var answer = try #require(BlockDelta.answer(chunk: chunk, sums: BlockDelta.sums(own)))
        answer[answer.count - 1] ^= 0xFF
        var rebuilt = own
        #expect(BlockDelta.apply(answer, to: &rebuilt) == Self.block)
        #expect(ChunkHash.of(rebuilt) != ChunkHash.of(chunk))
    }
}
