import Dispatch
import Foundation
import PeerFiles
import Synchronization
import Testing
@testable import SyncEngine

/// A restore fetches the chunks its store lacks from the version's holders several at a time,
/// within its bounds, each verified, a bad answer asked again of the next holder. The holders
/// are a fake here (the scheduling is pure logic); `RestoreProgressTests` runs it against a peer.
@Suite struct RestoreFetchTests {
    /// Holders that answer on another thread a moment later, counting what is in flight.
    final class Holders: Sendable {
        let chunks: [ChunkRef: [UInt8]]
        /// (device, chunk offset) pairs that answer wrong bytes.
        let lies: Set<String>
        let state = Mutex<(inFlight: Int, bytes: Int, maxInFlight: Int, maxBytes: Int, asked: [String])>((0, 0, 0, 0, []))

        init(_ chunks: [ChunkRef: [UInt8]], lies: Set<String> = []) { (self.chunks, self.lies) = (chunks, lies) }

        func ask(_ device: String, _ chunk: ChunkRef, _ answer: @escaping @Sendable ([UInt8]?) -> Void) {
            state.withLock { s in
                s.inFlight += 1
                s.bytes += Int(chunk.size)
                (s.maxInFlight, s.maxBytes) = (max(s.maxInFlight, s.inFlight), max(s.maxBytes, s.bytes))
                s.asked.append("\(device)@\(chunk.offset)")
            }
            let bytes = lies.contains("\(device)@\(chunk.offset)") ? [UInt8](repeating: 0, count: Int(chunk.size)) : chunks[chunk]
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { [self] in
                state.withLock { s in
                    s.inFlight -= 1
                    s.bytes -= Int(chunk.size)
                }
                answer(bytes)
            }
        }
    }

    static func chunks(_ count: Int, size: Int) -> (refs: [ChunkRef], bytes: [ChunkRef: [UInt8]]) {
        var refs: [ChunkRef] = []
        var bytes: [ChunkRef: [UInt8]] = [:]
        for n in 0..<count {
            let data = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n &* 7 &+ 1) }
            let ref = ChunkRef(offset: UInt64(n * size), size: UInt32(size), hash: ChunkHash.of(data))
            refs.append(ref)
            bytes[ref] = data
        }
        return (refs, bytes)
    }

    @Test func chunksComeSeveralAtOnceWithinTheWindowEachVerifiedFromTheNextHolderWhenOneLies() {
        let (refs, bytes) = Self.chunks(20, size: 1000)
        let holders = Holders(bytes, lies: ["B@3000"])
        let fetch = RestoreFetch(holders: ["A", "B"], window: 4, windowBytes: 1 << 20) { holders.ask($0, $1, $2) }
        var written: [UInt64: (bytes: [UInt8], from: String)] = [:]
        let failure = fetch.run(refs) { chunk, data, device in
            written[chunk.offset] = (data, device)
            return true
        }
        #expect(failure == nil)
        #expect(written.count == 20 && refs.allSatisfy { written[$0.offset]?.bytes == bytes[$0] })
        let state = holders.state.withLock { $0 }
        #expect(state.maxInFlight == 4, "several requests in flight, never more than the window")
        // Spread over the holders (chunk i first of holder i mod 2); chunk 3, first asked of B,
        // which lied, came from A.
        #expect(written[3000]?.from == "A" && state.asked.contains("B@3000") && state.asked.contains("A@3000"))
        #expect(Set(written.values.map(\.from)) == ["A", "B"])
    }

    @Test func theBytesInFlightStayWithinTheirBound() {
        let (refs, bytes) = Self.chunks(12, size: 1000)
        let holders = Holders(bytes)
        let fetch = RestoreFetch(holders: ["A"], window: 8, windowBytes: 2500) { holders.ask($0, $1, $2) }
        #expect(fetch.run(refs) { _, _, _ in true } == nil)
        let state = holders.state.withLock { $0 }
        #expect(state.maxBytes <= 2500 && state.maxInFlight == 2, "\(state)")
    }

    @Test func aChunkNoHolderGivesEndsTheFetch() {
        let (refs, bytes) = Self.chunks(6, size: 500)
        let holders = Holders(bytes, lies: ["A@2500", "B@2500"])
        let fetch = RestoreFetch(holders: ["A", "B"], window: 3) { holders.ask($0, $1, $2) }
        #expect(fetch.run(refs) { _, _, _ in true } == .unavailable(offset: 2500))
        #expect(RestoreFetch(holders: [], ask: { _, _, _ in }).run(refs) { _, _, _ in true } == .unavailable(offset: 0))
    }
}
