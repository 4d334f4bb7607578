internal import PeerFiles
internal import PeerIndex

/// The chunks of all entries of an offer numbered in one sequence, entry by entry, as the
/// wire counts them (`chunk` frames, acks and the accept's have-bitmap).
///
/// An offer may leave the manifests of its last entries out (`streamed-manifest`): their
/// chunks become known one by one, each with its `hashedChunk` frame on the receiver and as
/// the sender hashes them, in entry order. So the layout holds the manifests of a prefix of
/// the entries, and the chunks known so far of the entry after them (the streaming one).
struct ChunkLayout: Sendable {
    /// The manifests of the entries whose chunks are all known: entries 0 ..< count.
    private(set) var manifests: [Manifest]
    /// Every entry's size, as offered.
    let fileSizes: [UInt64]
    /// Global index of the first chunk of each entry in `manifests`, and of the streaming entry.
    private(set) var firstChunk: [Int]
    /// The chunks of the streaming entry known so far.
    private(set) var streamed: [ChunkRef] = []
    private(set) var chunkCount: Int
    /// The chunks the offer itself listed (its manifests): those an accept's bitmap covers.
    let offeredChunkCount: Int

    /// The layout of an offer with every manifest.
    init(manifests: [Manifest]) {
        self.init(manifests: manifests, streamedSizes: [])
    }

    /// The layout of an offer with the manifests of its first entries and, after them, the
    /// sizes of the entries whose manifests stream.
    init(manifests: [Manifest], streamedSizes: [UInt64]) {
        self.manifests = manifests
        fileSizes = manifests.map(\.fileSize) + streamedSizes
        var firsts: [Int] = []
        var next = 0
        for manifest in manifests {
            firsts.append(next)
            next += manifest.chunks.count
        }
        if !streamedSizes.isEmpty { firsts.append(next) }
        firstChunk = firsts
        chunkCount = next
        offeredChunkCount = next
    }

    /// Every entry's chunks are known.
    var isComplete: Bool { manifests.count == fileSizes.count }
    /// The entry whose chunks are being streamed, if any.
    var streamingEntry: Int? { isComplete ? nil : manifests.count }
    /// Whether the offer left manifests out.
    var isStreamed: Bool { offeredChunkCount != chunkCount || !isComplete }

    /// Why a streamed chunk does not fit the entry it would extend.
    enum ExtendError: Error, Equatable, CustomStringConvertible {
        case complete
        case size(UInt32, entry: Int, allowed: ClosedRange<Int>)
        case pastEnd(entry: Int)
        case manifest(ManifestError)

        var description: String {
            switch self {
            case .complete: "every chunk of the offer is known already"
            case let .size(size, entry, allowed): "a chunk of \(size) bytes in entry \(entry), where its chunks are \(allowed.lowerBound)…\(allowed.upperBound) bytes"
            case let .pastEnd(entry): "a chunk past the end of entry \(entry)"
            case let .manifest(error): error.description
            }
        }
    }

    /// Adds the next chunk of the streaming entry (at index `chunkCount`). Its size must be
    /// one FastCDC gives a file of the entry's size (`ChunkParameters.forFileSize`: at most
    /// `maxSize`, and at least `minSize` unless it ends the entry), and it must not run past
    /// the entry's end, so a peer cannot make an entry take more chunks than its size allows.
    /// Returns the entry it completed, if it did.
    @discardableResult
    mutating func extend(size: UInt32, hash: ChunkHash) throws(ExtendError) -> Int? {
        guard let entry = streamingEntry else { throw .complete }
        let fileSize = fileSizes[entry]
        let parameters = ChunkParameters.forFileSize(fileSize)
        let offset = streamed.last?.end ?? 0
        guard UInt64(size) <= fileSize - offset else { throw .pastEnd(entry: entry) }
        let ends = offset + UInt64(size) == fileSize
        let allowed = (ends ? 1 : parameters.minSize)...parameters.maxSize
        guard allowed.contains(Int(size)) else { throw .size(size, entry: entry, allowed: allowed) }
        streamed.append(ChunkRef(offset: offset, size: size, hash: hash))
        chunkCount += 1
        guard ends else { return nil }
        do throws(ManifestError) {
            manifests.append(try Manifest(fileSize: fileSize, chunks: streamed))
        } catch {
            throw .manifest(error)
        }
        streamed = []
        if !isComplete { firstChunk.append(chunkCount) }
        return entry
    }

    /// The entry and chunk of global index `index`.
    func locate(_ index: Int) -> (entry: Int, chunk: ChunkRef)? {
        guard index >= 0 && index < chunkCount else { return nil }
        if let entry = streamingEntry, index >= firstChunk[entry] {
            return (entry, streamed[index - firstChunk[entry]])
        }
        var low = 0, high = manifests.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            // Skip entries without chunks that start at the same index.
            if firstChunk[mid] <= index { low = mid } else { high = mid - 1 }
        }
        while manifests[low].chunks.isEmpty || index - firstChunk[low] >= manifests[low].chunks.count { low += 1 }
        return (low, manifests[low].chunks[index - firstChunk[low]])
    }

    /// The manifest of entry `entry`, once all its chunks are known.
    func manifest(of entry: Int) -> Manifest? {
        entry < manifests.count ? manifests[entry] : nil
    }

    /// Every known chunk from global index `start` on, in order.
    func chunks(from start: Int = 0) -> [ChunkRef] {
        guard start < chunkCount else { return [] }
        var out: [ChunkRef] = []
        out.reserveCapacity(chunkCount - start)
        var next = 0
        for manifest in manifests {
            if next + manifest.chunks.count > start {
                out.append(contentsOf: manifest.chunks[max(0, start - next)...])
            }
            next += manifest.chunks.count
        }
        out.append(contentsOf: streamed[max(0, start - next)...])
        return out
    }

    /// The chunks from global index `start` on as the index records them for a transfer;
    /// those in `verified` marked verified.
    func transferChunks(from start: Int = 0, verified: Set<Int> = []) -> [TransferChunk] {
        chunks(from: start).enumerated().map { offset, chunk in
            let global = start + offset
            return TransferChunk(index: global, offset: Int64(chunk.offset), size: Int64(chunk.size),
                                 hash: chunk.hash.bytes, verified: verified.contains(global))
        }
    }

    /// The sizes of the chunks from global index `start` on.
    func chunkSizes(from start: Int = 0) -> [Int] {
        chunks(from: start).map { Int($0.size) }
    }

    var totalSize: Int64 { fileSizes.reduce(0) { $0 + Int64($1) } }

    /// The global indices of entry `entry`'s chunks known so far.
    func range(of entry: Int) -> Range<Int> {
        if let manifest = manifest(of: entry) { return firstChunk[entry]..<(firstChunk[entry] + manifest.chunks.count) }
        if entry == streamingEntry { return firstChunk[entry]..<chunkCount }
        return chunkCount..<chunkCount
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
