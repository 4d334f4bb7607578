/// A set of chunk indices as one bit per chunk (a transfer may have millions of chunks: a
/// `Set<Int>` would cost tens of bytes for each).
struct ChunkSet: Sendable {
    private var words: [UInt64] = []

    func contains(_ index: Int) -> Bool {
        guard index >= 0, index / 64 < words.count else { return false }
        return words[index / 64] & (1 << UInt64(index % 64)) != 0
    }

    /// Adds `index`; true when it was not in the set.
    @discardableResult
    mutating func insert(_ index: Int) -> Bool {
        guard index >= 0 else { return false }
        if index / 64 >= words.count { words += [UInt64](repeating: 0, count: index / 64 + 1 - words.count) }
        let bit: UInt64 = 1 << UInt64(index % 64)
        defer { words[index / 64] |= bit }
        return words[index / 64] & bit == 0
    }
}
