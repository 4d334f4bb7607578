internal import PeerCrypto

/// An in-place delta of one chunk: what a peer that lacks a chunk, but holds an older
/// version of the same file, asks for instead of the whole chunk.
///
/// The asker hashes what its own file holds at the chunk's offset in blocks of `blockSize`
/// bytes and sends the sums (`sums(_:)`). The server reads the chunk and answers with a
/// bitmap of the blocks whose sums differ and only those blocks (`answer(chunk:sums:)`).
/// The asker fills them into its own bytes (`apply(_:to:)`) and checks the whole chunk's
/// content hash as for any fetched chunk: a sum that matches different bytes (by chance or
/// by design), a file changed meanwhile, or a server that lies only costs a plain request.
/// After a change written in place (the size and the bytes around it unchanged), the chunks
/// cut again after it are all-equal blocks: about the changed bytes travel, whatever the
/// chunk size.
///
/// ```
///  sums:    count × 8 bytes, the first 8 bytes of BLAKE3 of each block (the last one may be short)
///  answer:  bitmap, ceil(count / 8) bytes, bit i (byte i / 8, bit i % 8 from the lowest) set
///           when block i differs; unused high bits of the last byte are 0;
///           then each differing block in order, whole (the last one as long as it is)
/// ```
package enum BlockDelta {
    /// The size of the blocks compared: 1,024 sums (8 KiB) for the largest chunk.
    package static let blockSize = 16 << 10
    /// Bytes of each block's sum.
    package static let sumSize = 8
    /// Smaller chunks are asked for whole: a delta of one block saves nothing.
    package static let minimumChunk = 2 * blockSize

    /// The number of blocks (and sums) of a chunk of `size` bytes.
    package static func blockCount(size: Int) -> Int {
        (size + blockSize - 1) / blockSize
    }

    /// Bytes of the bitmap for a chunk of `size` bytes.
    package static func bitmapSize(size: Int) -> Int {
        (blockCount(size: size) + 7) / 8
    }

    /// The sums of the blocks of `data` (`blockCount(size:)` × `sumSize` bytes).
    package static func sums(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        let count = blockCount(size: data.count)
        var sums = [UInt8](repeating: 0, count: count * sumSize)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: BLAKE3.digestLength) { digest in
            sums.withUnsafeMutableBytes { out in
                for block in 0..<count {
                    let start = block * blockSize
                    let piece = UnsafeRawBufferPointer(rebasing: data[start..<min(data.count, start + blockSize)])
                    BLAKE3.hash(piece, into: digest.baseAddress!)
                    out.baseAddress!.advanced(by: block * sumSize).copyMemory(from: digest.baseAddress!, byteCount: sumSize)
                }
            }
        }
        return sums
    }

    package static func sums(_ data: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { sums($0) }
    }

    /// The sums of `size` bytes that `read(offset, buffer)` fills piece by piece (at most
    /// 1 MiB at a time, at block boundaries): a chunk is summed without holding it whole.
    package static func sums<E: Error>(size: Int, read: (Int, UnsafeMutableRawBufferPointer) throws(E) -> Void) throws(E) -> [UInt8] {
        let piece = 64 * blockSize
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: min(size, piece), alignment: 64)
        defer { buffer.deallocate() }
        var all: [UInt8] = []
        all.reserveCapacity(blockCount(size: size) * sumSize)
        var offset = 0
        while offset < size {
            let part = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(piece, size - offset)])
            try read(offset, part)
            all += sums(UnsafeRawBufferPointer(part))
            offset += part.count
        }
        return all
    }

    /// Which blocks of a chunk differ from the asker's, and where each byte of the answer
    /// comes from (`pieces`): the server streams the answer from the file.
    package struct Differences: Sendable, Equatable {
        package let bitmap: [UInt8]
        /// The differing blocks, in order.
        package let blocks: [Int]
        package let chunkSize: Int

        /// Every block differs: the answer of a server that does not compare (it is the
        /// whole chunk after a full bitmap).
        package static func all(size: Int) -> Differences {
            let count = BlockDelta.blockCount(size: size)
            var bitmap = [UInt8](repeating: 0xFF, count: (count + 7) / 8)
            if count % 8 != 0 { bitmap[bitmap.count - 1] = UInt8(1 << (count % 8)) - 1 }
            return Differences(bitmap: bitmap, blocks: Array(0..<count), chunkSize: size)
        }

        /// The answer's length: the bitmap and the differing blocks.
        package var answerSize: Int {
            bitmap.count + blocks.reduce(0) { $0 + length(of: $1) }
        }

        private func length(of block: Int) -> Int {
            min(chunkSize, (block + 1) * BlockDelta.blockSize) - block * BlockDelta.blockSize
        }

        /// Where a piece of the answer comes from: bytes of the bitmap, or of the chunk.
        package enum Piece: Equatable {
            case bitmap(Range<Int>)
            case chunk(offset: Int, length: Int)
            package var length: Int {
                switch self {
                case let .bitmap(range): range.count
                case let .chunk(_, length): length
                }
            }
        }

        /// Fills `buffer` with the answer's bytes from `offset` on: the bitmap's, and the
        /// differing blocks' that `read(start, part)` reads from the chunk at `start`.
        package func fill<E: Error>(_ buffer: UnsafeMutableRawBufferPointer, from offset: Int,
                                   chunk read: (Int, UnsafeMutableRawBufferPointer) throws(E) -> Void) throws(E) {
            var at = 0
            for piece in pieces(from: offset, count: buffer.count) {
                let part = UnsafeMutableRawBufferPointer(rebasing: buffer[at..<at + piece.length])
                switch piece {
                case let .bitmap(range): bitmap[range].withUnsafeBytes { part.copyMemory(from: $0) }
                case let .chunk(start, _): try read(start, part)
                }
                at += piece.length
            }
        }

        /// The pieces that make the `count` answer bytes from `offset` on (within `answerSize`).
        package func pieces(from offset: Int, count: Int) -> [Piece] {
            var out: [Piece] = []
            var at = offset
            let end = min(offset + count, answerSize)
            if at < bitmap.count && at < end {
                out.append(.bitmap(at..<min(bitmap.count, end)))
                at = min(bitmap.count, end)
            }
            while at < end {
                // Every differing block but the chunk's last one is whole: the k-th starts at
                // bitmap + k × blockSize in the answer.
                let k = (at - bitmap.count) / BlockDelta.blockSize
                let within = (at - bitmap.count) % BlockDelta.blockSize
                let length = min(end - at, length(of: blocks[k]) - within)
                out.append(.chunk(offset: blocks[k] * BlockDelta.blockSize + within, length: length))
                at += length
            }
            return out
        }
    }

    /// The blocks of a chunk of `size` bytes whose sums (`ours`) differ from the asker's
    /// (`theirs`); nil when `theirs` is not exactly one sum per block.
    package static func differences(ours: [UInt8], theirs: [UInt8], size: Int) -> Differences? {
        let count = blockCount(size: size)
        guard ours.count == count * sumSize, theirs.count == count * sumSize else { return nil }
        var bitmap = [UInt8](repeating: 0, count: (count + 7) / 8)
        var differing: [Int] = []
        for block in 0..<count {
            let at = block * sumSize
            if ours[at..<at + sumSize] != theirs[at..<at + sumSize] {
                bitmap[block / 8] |= 1 << UInt8(block % 8)
                differing.append(block)
            }
        }
        return Differences(bitmap: bitmap, blocks: differing, chunkSize: size)
    }

    /// The server's answer for `chunk` to an asker that sent `sums`; nil when the count of
    /// sums is not exactly the chunk's block count.
    package static func answer(chunk: UnsafeRawBufferPointer, sums theirs: [UInt8]) -> [UInt8]? {
        guard let differences = differences(ours: sums(chunk), theirs: theirs, size: chunk.count) else { return nil }
        return answer(chunk: chunk, differences)
    }

    /// The answer that carries `differences` of `chunk`.
    package static func answer(chunk: UnsafeRawBufferPointer, _ differences: Differences) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: differences.answerSize) { buffer, count in
            differences.fill(UnsafeMutableRawBufferPointer(buffer), from: 0) { start, part in
                part.copyMemory(from: UnsafeRawBufferPointer(rebasing: chunk[start..<start + part.count]))
            }
            count = buffer.count
        }
    }

    /// The sums of `chunk` as `reader`'s file holds it now, read 1 MiB at a time (a file that
    /// ends before the chunk does throws, as `ChunkReader.read(at:into:)`).
    package static func sums(of chunk: ChunkRef, in reader: ChunkReader) throws(FileError) -> [UInt8] {
        try sums(size: Int(chunk.size)) { (offset, buffer) throws(FileError) in
            try reader.read(at: chunk.offset + UInt64(offset), into: buffer)
        }
    }

    package static func answer(chunk: [UInt8], sums: [UInt8]) -> [UInt8]? {
        chunk.withUnsafeBytes { answer(chunk: $0, sums: sums) }
    }

    /// Writes the blocks an answer carries over `base` (what the asker's own file holds at
    /// the chunk's range, as long as the chunk); returns how many bytes the answer carried,
    /// or nil (and `base` untouched) when the answer is not well formed for a chunk of that
    /// size: a short or long bitmap or data, or a bit set beyond the last block. The result
    /// still has to match the chunk's hash.
    package static func apply(_ answer: [UInt8], to base: inout [UInt8]) -> Int? {
        let count = blockCount(size: base.count)
        let bitmapBytes = (count + 7) / 8
        guard answer.count >= bitmapBytes else { return nil }
        if count % 8 != 0, answer[bitmapBytes - 1] >> UInt8(count % 8) != 0 { return nil }
        var expected = bitmapBytes
        for block in 0..<count where answer[block / 8] & (1 << UInt8(block % 8)) != 0 {
            expected += min(base.count, (block + 1) * blockSize) - block * blockSize
        }
        guard answer.count == expected else { return nil }
        var cursor = bitmapBytes
        for block in 0..<count where answer[block / 8] & (1 << UInt8(block % 8)) != 0 {
            let start = block * blockSize
            let length = min(base.count, start + blockSize) - start
            base.withUnsafeMutableBytes { target in
                answer.withUnsafeBytes { (target.baseAddress! + start).copyMemory(from: $0.baseAddress! + cursor, byteCount: length) }
            }
            cursor += length
        }
        return answer.count - bitmapBytes
    }
}
