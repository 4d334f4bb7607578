internal import PeerFiles
internal import PeerIndex

/// The chunks of all entries of an offer numbered in one sequence, entry by entry, as the
/// wire counts them (`chunk` frames, acks and the accept's have-bitmap).
struct ChunkLayout: Sendable {
    let manifests: [Manifest]
    /// Global index of each entry's first chunk.
    let firstChunk: [Int]
    let chunkCount: Int

    init(manifests: [Manifest]) {
        self.manifests = manifests
        var firsts: [Int] = []
        var next = 0
        for manifest in manifests {
            firsts.append(next)
            next += manifest.chunks.count
        }
        firstChunk = firsts
        chunkCount = next
    }

    /// The entry and chunk of global index `index`.
    func locate(_ index: Int) -> (entry: Int, chunk: ChunkRef)? {
        guard index >= 0 && index < chunkCount else { return nil }
        var low = 0, high = manifests.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            // Skip entries without chunks that start at the same index.
            if firstChunk[mid] <= index { low = mid } else { high = mid - 1 }
        }
        while manifests[low].chunks.isEmpty || index - firstChunk[low] >= manifests[low].chunks.count { low += 1 }
        return (low, manifests[low].chunks[index - firstChunk[low]])
    }

    /// Every chunk as the index records it for a transfer, by global index; those in
    /// `verified` marked verified.
    func transferChunks(verified: Set<Int> = []) -> [TransferChunk] {
        var chunks: [TransferChunk] = []
        chunks.reserveCapacity(chunkCount)
        for (entry, manifest) in manifests.enumerated() {
            for (i, chunk) in manifest.chunks.enumerated() {
                let global = firstChunk[entry] + i
                chunks.append(TransferChunk(index: global, offset: Int64(chunk.offset), size: Int64(chunk.size),
                                            hash: chunk.hash.bytes, verified: verified.contains(global)))
            }
        }
        return chunks
    }

    var chunkSizes: [Int] { manifests.flatMap { $0.chunks.map { Int($0.size) } } }
    var totalSize: Int64 { manifests.reduce(0) { $0 + Int64($1.fileSize) } }

    /// The global indices of entry `entry`'s chunks.
    func range(of entry: Int) -> Range<Int> {
        firstChunk[entry]..<(firstChunk[entry] + manifests[entry].chunks.count)
    }
}

/// The accept frame's have-bitmap: bit i of byte i/8, least significant bit first.
enum ChunkBitmap {
    static func encode(_ set: Set<Int>, count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: (count + 7) / 8)
        for index in set where index >= 0 && index < count {
            bytes[index / 8] |= 1 << UInt8(index % 8)
        }
        return bytes
    }

    /// Nil when the bitmap does not fit `count` chunks.
    static func decode(_ bytes: [UInt8], count: Int) -> Set<Int>? {
        guard bytes.count == (count + 7) / 8 else { return nil }
        var set = Set<Int>()
        for index in 0..<count where bytes[index / 8] & (1 << UInt8(index % 8)) != 0 {
            set.insert(index)
        }
        return set
    }
}
