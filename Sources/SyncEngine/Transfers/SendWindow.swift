/// Which chunks a sender puts on the wire next: a pure model of the send side of one
/// transfer, so the flow control and retry rules can be tested exhaustively.
///
///     pending ──next()──▶ in flight ──ack(ok)──▶ done
///                            │
///                            └──ack(bad)──▶ pending again (at most `maxAttempts` sends)
///
/// At most `windowBytes` are in flight at once (and always at least one chunk, however
/// large), so memory stays bounded by the window, not by the file.
package struct SendWindow: Sendable, Equatable {
    package enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The receiver rejected the same chunk too often (the source changes under us, or
        /// the peer lies).
        case tooManyAttempts(index: Int)
        /// The receiver acknowledged a chunk we never sent or already finished.
        case unexpectedAck(index: Int)

        package var description: String {
            switch self {
            case let .tooManyAttempts(index):
                return "chunk \(index) was rejected by the receiver too many times"
            case let .unexpectedAck(index):
                return "the receiver acknowledged chunk \(index), which is not in flight"
            }
        }
    }

    package private(set) var sizes: [Int]
    package let windowBytes: Int
    package let maxAttempts: Int
    /// Chunks not yet sent (or to be sent again), in ascending order.
    package private(set) var pending: [Int]
    package private(set) var inFlight: Set<Int> = []
    package private(set) var inFlightBytes = 0
    package private(set) var attempts: [Int: Int] = [:]
    /// Bytes of chunks the receiver confirmed (including those it already had).
    package private(set) var confirmedBytes: Int
    /// Bytes put on the wire, retries included (for "bytes re-sent" figures).
    package private(set) var sentBytes = 0
    private var cursor = 0

    /// - Parameters:
    ///   - sizes: the size of every chunk of the transfer, in order.
    ///   - have: chunks the receiver already holds verified (they are never sent).
    package init(sizes: [Int], have: Set<Int>, windowBytes: Int = 16 << 20, maxAttempts: Int = 3) {
        self.sizes = sizes
        self.windowBytes = windowBytes
        self.maxAttempts = maxAttempts
        pending = sizes.indices.filter { !have.contains($0) }
        confirmedBytes = have.reduce(0) { $0 + (sizes.indices.contains($1) ? sizes[$1] : 0) }
    }

    /// Adds chunks after the last one (a streamed manifest's, as they are hashed): sent after
    /// every chunk pending now.
    package mutating func append(sizes more: [Int]) {
        let first = sizes.count
        sizes += more
        pending += first..<sizes.count
    }

    package var totalBytes: Int { sizes.reduce(0, +) }
    /// True when every chunk is confirmed.
    package var isComplete: Bool { pending.count == cursor && inFlight.isEmpty }

    /// The chunks to send now (possibly none), marked in flight.
    package mutating func next() -> [Int] {
        var out: [Int] = []
        while cursor < pending.count {
            let index = pending[cursor]
            let size = sizes[index]
            if !inFlight.isEmpty && inFlightBytes + size > windowBytes { break }
            cursor += 1
            inFlight.insert(index)
            inFlightBytes += size
            sentBytes += size
            attempts[index, default: 0] += 1
            out.append(index)
        }
        return out
    }

    /// Records the receiver's verdict on a chunk.
    package mutating func ack(_ index: Int, ok: Bool) throws(Failure) {
        guard inFlight.remove(index) != nil else { throw .unexpectedAck(index: index) }
        inFlightBytes -= sizes[index]
        if ok {
            confirmedBytes += sizes[index]
            return
        }
        guard attempts[index, default: 0] < maxAttempts else { throw .tooManyAttempts(index: index) }
        // Send it again before anything new.
        pending.insert(index, at: cursor)
    }
}
