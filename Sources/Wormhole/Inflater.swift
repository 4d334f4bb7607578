/// A streaming DEFLATE decoder (RFC 1951), for the zip files Magic Wormhole sends folders
/// in. Input comes in chunks from `input`; output goes to `output` in chunks; more than
/// `limit` bytes of output is an error (a zip entry that lies about its size, a zip bomb).
///
/// Huffman codes are decoded canonically, one bit at a time (as zlib's puff does): simple
/// and bounded, not fast.
struct Inflater {
    enum Failure: Error, Equatable {
        case truncated
        case malformed(String)
        case overLimit
    }

    private struct Huffman {
        var count = [Int](repeating: 0, count: 16)
        var symbol: [Int]

        /// Builds the code for `lengths`; throws for an over-subscribed set.
        init(lengths: ArraySlice<Int>) throws(Failure) {
            symbol = [Int](repeating: 0, count: lengths.count)
            for length in lengths { count[length] += 1 }
            var left = 1
            for length in 1..<16 {
                left <<= 1
                left -= count[length]
                guard left >= 0 else { throw .malformed("over-subscribed Huffman code") }
            }
            var offsets = [Int](repeating: 0, count: 16)
            for length in 1..<15 { offsets[length + 1] = offsets[length] + count[length] }
            for (i, length) in lengths.enumerated() where length != 0 {
                symbol[offsets[length]] = i
                offsets[length] += 1
            }
        }
    }

    private static let lengthBase = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]
    private static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    private static let distanceBase = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073,
                                       4097, 6145, 8193, 12289, 16385, 24577]
    private static let distanceExtra = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]
    private static let codeLengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]

    private let input: () throws -> [UInt8]?
    private let output: ([UInt8]) throws -> Void
    private let limit: Int64
    private var chunk: [UInt8] = []
    private var position = 0
    private var bits: UInt32 = 0
    private var bitCount = 0
    /// The last 32 KiB of output (back-references reach that far), then what is not flushed.
    private var window: [UInt8] = []
    private var flushed = 0
    private(set) var produced: Int64 = 0

    init(limit: Int64, input: @escaping () throws -> [UInt8]?, output: @escaping ([UInt8]) throws -> Void) {
        self.limit = limit
        self.input = input
        self.output = output
    }

    /// Decodes the whole stream; returns the bytes produced.
    mutating func run() throws -> Int64 {
        var last = false
        while !last {
            last = try take(1) == 1
            switch try take(2) {
            case 0: try stored()
            case 1: try codes(literal: Self.fixedLiteral, distance: Self.fixedDistance)
            case 2: try dynamic()
            default: throw Failure.malformed("reserved block type")
            }
        }
        try flush(keep: 0)
        return produced
    }

    private static let fixedLiteral: Huffman = {
        var lengths = [Int](repeating: 8, count: 288)
        for i in 144..<256 { lengths[i] = 9 }
        for i in 256..<280 { lengths[i] = 7 }
        return try! Huffman(lengths: lengths[...])
    }()
    private static let fixedDistance: Huffman = try! Huffman(lengths: [Int](repeating: 5, count: 30)[...])

    private mutating func byte() throws -> UInt8 {
        while position == chunk.count {
            guard let more = try input() else { throw Failure.truncated }
            chunk = more
            position = 0
        }
        defer { position += 1 }
        return chunk[position]
    }

    private mutating func take(_ count: Int) throws -> Int {
        while bitCount < count {
            bits |= UInt32(try byte()) << UInt32(bitCount)
            bitCount += 8
        }
        let value = Int(bits & ((1 << UInt32(count)) - 1))
        bits >>= UInt32(count)
        bitCount -= count
        return value
    }

    private mutating func emit(_ value: UInt8) throws {
        produced += 1
        guard produced <= limit else { throw Failure.overLimit }
        window.append(value)
        if window.count >= 1 << 17 { try flush(keep: 1 << 15) }
    }

    /// Writes what is not yet written, keeping the last `keep` bytes for back-references.
    private mutating func flush(keep: Int) throws {
        if window.count > flushed { try output(Array(window[flushed...])) }
        let drop = max(0, window.count - keep)
        window.removeFirst(drop)
        flushed = window.count
    }

    private mutating func stored() throws {
        bits = 0
        bitCount = 0
        let length = Int(try byte()) | Int(try byte()) << 8
        let complement = Int(try byte()) | Int(try byte()) << 8
        guard length == ~complement & 0xFFFF else { throw Failure.malformed("stored block length") }
        for _ in 0..<length { try emit(try byte()) }
    }

    private mutating func decode(_ h: Huffman) throws -> Int {
        var code = 0, first = 0, index = 0
        for length in 1..<16 {
            code |= try take(1)
            let count = h.count[length]
            if code - count < first { return h.symbol[index + (code - first)] }
            index += count
            first += count
            first <<= 1
            code <<= 1
        }
        throw Failure.malformed("invalid Huffman code")
    }

    private mutating func codes(literal: Huffman, distance: Huffman) throws {
        while true {
            var symbol = try decode(literal)
            if symbol < 256 { try emit(UInt8(symbol)); continue }
            if symbol == 256 { return }
            symbol -= 257
            guard symbol < 29 else { throw Failure.malformed("bad length symbol") }
            let length = Self.lengthBase[symbol] + (try take(Self.lengthExtra[symbol]))
            let d = try decode(distance)
            guard d < 30 else { throw Failure.malformed("bad distance symbol") }
            let back = Self.distanceBase[d] + (try take(Self.distanceExtra[d]))
            guard back <= window.count else { throw Failure.malformed("distance too far back") }
            for _ in 0..<length { try emit(window[window.count - back]) }
        }
    }

    private mutating func dynamic() throws {
        let literalCount = try take(5) + 257, distanceCount = try take(5) + 1, codeCount = try take(4) + 4
        guard literalCount <= 286, distanceCount <= 30 else { throw Failure.malformed("too many codes") }
        var lengths = [Int](repeating: 0, count: 19)
        for i in 0..<codeCount { lengths[Self.codeLengthOrder[i]] = try take(3) }
        let lengthCode = try Huffman(lengths: lengths[...])
        var all: [Int] = []
        while all.count < literalCount + distanceCount {
            let symbol = try decode(lengthCode)
            switch symbol {
            case 0..<16: all.append(symbol)
            case 16:
                guard let previous = all.last else { throw Failure.malformed("repeat with no previous length") }
                all += [Int](repeating: previous, count: 3 + (try take(2)))
            case 17: all += [Int](repeating: 0, count: 3 + (try take(3)))
            default: all += [Int](repeating: 0, count: 11 + (try take(7)))
            }
        }
        guard all.count == literalCount + distanceCount, all[256] != 0 else { throw Failure.malformed("bad code lengths") }
        try codes(literal: try Huffman(lengths: all[0..<literalCount]), distance: try Huffman(lengths: all[literalCount...]))
    }
}
