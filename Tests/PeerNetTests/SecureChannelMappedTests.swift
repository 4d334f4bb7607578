import PeerCrypto
@testable import PeerNet
import PeerWire
import Testing

/// A chunk sent from bytes at hand (a mapped file's), whole Noise messages sealed straight
/// from them: the peer receives the very frame the piece-by-piece path sends, after frames
/// left waiting in a partly filled message and before the next ones.
@Suite struct SecureChannelMappedTests {
    @Test(arguments: [0, 1, 65_519, 65_520, 65_519 * 3 + 7, 1 << 20])
    func chunkFromBytesArrivesAsOneFrame(size: Int) throws {
        let pair = try ChannelPair.make(rekeyInterval: 3)
        defer { pair.initiator.close(); pair.responder.close() }
        let id = try TransferID(Array(1...16))
        let data = patternBytes(size, seed: size + 11)
        let hash = patternBytes(32, seed: size)
        let receiver = pair.responderReceives(4)
        try pair.initiator.send([.ping(1)], more: true)
        try data.withUnsafeBytes { try pair.initiator.sendChunk(id: id, index: 4, hash: nil, bytes: $0) }
        try data.withUnsafeBytes { try pair.initiator.sendChunk(id: id, index: 5, hash: hash, bytes: $0) }
        try pair.initiator.send(.ping(2))
        #expect(try receiver.value(within: 60) == [.ping(1), .chunk(id: id, index: 4, data: data),
                                                     .hashedChunk(id: id, index: 5, hash: hash, data: data), .ping(2)])
    }
}
