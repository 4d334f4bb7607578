import Foundation
import PeerCrypto
@testable import PeerNet
import PeerWire
import Synchronization
import Testing

/// Frame `index` of the bulk stream: pings and messages with ids in order, bodies of
/// 0, 1, small and 65,536 bytes.
private let bigBody = patternBytes(WireLimits.maxMessageBody, seed: 99)

private func bulkFrame(_ index: Int) -> Frame {
    let id = UInt64(index)
    switch index % 10 {
    case 0: return .ping(id)
    case 1: return .message(id: id, body: [])
    case 2: return .message(id: id, body: [UInt8(truncatingIfNeeded: index)])
    case 3 where index % 100 == 3:
        var body = bigBody
        body[0] = UInt8(truncatingIfNeeded: index)
        body[body.count - 1] = UInt8(truncatingIfNeeded: index >> 8)
        return .message(id: id, body: body)
    default: return .message(id: id, body: Array(bigBody[index % 7..<index % 7 + index % 300]))
    }
}

/// Sends frames 0..<count, alternating single sends and batches of 1 … 50.
private func sendBulk(_ channel: SecureChannel, count: Int) throws {
    var index = 0
    var batch = 1
    while index < count {
        if batch % 3 == 0 {
            try channel.send(bulkFrame(index))
            index += 1
        } else {
            let end = min(count, index + batch % 50 + 1)
            try channel.send((index..<end).map(bulkFrame))
            index = end
        }
        batch += 1
    }
}

/// Receives frames 0..<count and checks each; returns how many matched.
private func receiveBulk(_ channel: SecureChannel, count: Int) throws -> Int {
    var matched = 0
    for index in 0..<count {
        guard let frame = try channel.receive(deadline: .now + .seconds(60)) else { break }
        guard frame == bulkFrame(index) else { break }
        matched += 1
    }
    return matched
}

@Suite struct SecureChannelTransportTests {
    @Test(arguments: [3, 1 << 16] as [UInt64])
    func tenThousandFramesEachWay(rekeyInterval: UInt64) throws {
        let pair = try ChannelPair.make(rekeyInterval: rekeyInterval)
        let count = 10_000
        let (i, r) = (pair.initiator, pair.responder)
        let threads = [
            ChannelBackground { try sendBulk(i, count: count); return 0 },
            ChannelBackground { try sendBulk(r, count: count); return 0 },
            ChannelBackground { try receiveBulk(i, count: count) },
            ChannelBackground { try receiveBulk(r, count: count) },
        ]
        #expect(try threads[2].value(within: 300) == count)
        #expect(try threads[3].value(within: 300) == count)
        _ = try threads[0].value()
        _ = try threads[1].value()

        // Both directions went through many messages (and so, with interval 3, many rekeys).
        #expect(i.messageCounts.sent == r.messageCounts.received)
        #expect(r.messageCounts.sent == i.messageCounts.received)
        #expect(i.messageCounts.sent > 300)

        i.close()
        #expect(try r.receive(deadline: .now + .seconds(10)) == nil, "clean end after the last frame")
        r.close()
    }

    @Test func oneSendSpanningManyNoiseMessages() throws {
        let pair = try ChannelPair.make(rekeyInterval: 3)
        defer { pair.initiator.close(); pair.responder.close() }
        let frames: [Frame] = (0..<200).map { n in
            var bytes = bigBody
            bytes[n] ^= 0xFF
            return .streamData(id: UInt32(n), bytes: bytes)
        } + [.streamClose(id: 7)]
        let receiver = pair.responderReceives(frames.count)
        try pair.initiator.send(frames)
        #expect(try receiver.value(within: 120) == frames)
        // 200 × 65,549 bytes of frames cut into 65,519-byte plaintexts.
        let total = 200 * (WireLimits.frameHeaderSize + 8 + bigBody.count) + WireLimits.frameHeaderSize + 4
        let expectedMessages = (total + WireLimits.maxNoisePlaintext - 1) / WireLimits.maxNoisePlaintext
        #expect(pair.initiator.messageCounts.sent == UInt64(expectedMessages))
        #expect(pair.responder.messageCounts.received == UInt64(expectedMessages))
    }

    @Test(arguments: [0, 1, 65_536])
    func messageBodySizesRoundTrip(size: Int) throws {
        let pair = try ChannelPair.make(rekeyInterval: 3)
        defer { pair.initiator.close(); pair.responder.close() }
        let body = patternBytes(size, seed: size)
        for id in 0..<5 as Range<UInt64> {
            try pair.initiator.send(.message(id: id, body: body))
            #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == .message(id: id, body: body))
            try pair.responder.send(.message(id: id, body: body))
            #expect(try pair.initiator.receive(deadline: .now + .seconds(10)) == .message(id: id, body: body))
        }
    }

    @Test func smallFramesOfOneSendShareOneNoiseMessage() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        let pings = (0..<100 as Range<UInt64>).map(Frame.ping)
        try pair.initiator.send(pings)
        #expect(pair.initiator.messageCounts.sent == 1)
        for ping in pings { #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == ping) }
        #expect(pair.responder.messageCounts.received == 1)
    }

    /// Sends marked `more` leave their last message for the next send, whatever its kind: a
    /// burst of small frames from many calls goes out as one Noise message, in order, and
    /// nothing stays behind once a send without `more` (or `flush`) comes.
    @Test func sendsMarkedMoreShareTheNextSendsMessage() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        let receiver = pair.responderReceives(54)
        for n in 0..<50 as Range<UInt64> { try pair.initiator.send([.ping(n)], more: true) }
        #expect(pair.initiator.messageCounts.sent == 0, "nothing is sealed while more follows")
        _ = try pair.initiator.sendBlockResponse(request: 9, count: 1_000, more: true) { buffer, _ throws(NetError) in
            buffer.initializeMemory(as: UInt8.self, repeating: 7)
        }
        try pair.initiator.sendUrgent(.ping(100))
        #expect(pair.initiator.messageCounts.sent == 1, "an urgent frame takes what waits along")
        try pair.initiator.send([.ping(101)], more: true)
        try pair.initiator.flush()
        #expect(pair.initiator.messageCounts.sent == 2)
        try pair.initiator.send([.ping(102)])
        let expected: [Frame] = (0..<50 as Range<UInt64>).map(Frame.ping)
            + [.blockResponse(request: 9, ok: true, data: [UInt8](repeating: 7, count: 1_000)), .ping(100), .ping(101), .ping(102)]
        #expect(try receiver.value(within: 30) == expected)
        #expect(pair.initiator.messageCounts.sent == 3)
    }

    @Test func concurrentSendersDoNotInterleaveTheirFrames() throws {
        let pair = try ChannelPair.make(rekeyInterval: 3)
        defer { pair.initiator.close(); pair.responder.close() }
        let senders = (0..<4).map { sender in
            ChannelBackground {
                for n in 0..<500 {
                    let id = UInt64(sender) << 32 | UInt64(n)
                    try pair.initiator.send([.message(id: id, body: patternBytes(n % 97, seed: n)), .ping(id)])
                }
            }
        }
        var next = [UInt64](repeating: 0, count: 4)
        for _ in 0..<4 * 500 {
            let message = try pair.responder.receive(deadline: .now + .seconds(30))
            let ping = try pair.responder.receive(deadline: .now + .seconds(30))
            guard case let .message(id, body) = message else { Issue.record("expected a message, got \(String(describing: message))"); return }
            let sender = Int(id >> 32), n = id & 0xFFFF_FFFF
            #expect(n == next[sender], "sender \(sender) in order")
            #expect(body == patternBytes(Int(n) % 97, seed: Int(n)))
            #expect(ping == .ping(id), "a send's frames stay together")
            next[sender] = n + 1
        }
        for sender in senders { try sender.value() }
        #expect(next == [500, 500, 500, 500])
    }

    @Test func mismatchedRekeyIntervalsFailAuthentication() throws {
        // Proof that rekeying happens: a peer that does not rekey after message 3 cannot
        // decrypt message 4.
        let pair = try ChannelPair.make(rekeyInterval: 3, responderRekeyInterval: 1 << 16)
        defer { pair.initiator.close(); pair.responder.close() }
        for n in 0..<4 as Range<UInt64> { try pair.initiator.send(.ping(n)) }
        for n in 0..<3 as Range<UInt64> { #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == .ping(n)) }
        #expect(netError { () throws(NetError) in try pair.responder.receive(deadline: .now + .seconds(10)) } == .authenticationFailed)
    }

    // MARK: Tampering after the handshake

    struct TransportFlip: Sendable, CustomTestStringConvertible {
        var name: String
        /// Offset from the first transport byte of the direction.
        var offset: Int
        var mask: UInt8 = 0x01
        var responderToInitiator = false
        var testDescription: String { name }
    }

    /// Each message is 2 + 5 + 12 + 100 + 16 = 135 bytes on the wire.
    static let messageWireSize = 135

    @Test(arguments: [
        TransportFlip(name: "message 0, length high byte (+256)", offset: 0),
        TransportFlip(name: "message 0, length low byte (−1)", offset: 1),
        TransportFlip(name: "message 0, first ciphertext byte", offset: 2),
        TransportFlip(name: "message 0, frame body", offset: 60, mask: 0x80),
        TransportFlip(name: "message 0, last tag byte", offset: 134),
        TransportFlip(name: "message 1, first ciphertext byte", offset: 135 + 2),
        TransportFlip(name: "message 2, middle", offset: 2 * 135 + 70, mask: 0xFF),
        TransportFlip(name: "message 2, first tag byte", offset: 2 * 135 + 119),
        TransportFlip(name: "responder → initiator, message 1", offset: 135 + 40, responderToInitiator: true),
    ])
    func flippedTransportByteFailsAuthentication(flip: TransportFlip) throws {
        let initiatorHandshakeBytes = 36 + 2 + 48 + helloA.encode().count + 16  // message 1: 2 + 32 + 2-byte version
        let responderHandshakeBytes = 2 + 32 + 48 + helloB.encode().count + 16
        var flips = Relay.Flips()
        if flip.responderToInitiator {
            flips.responderToInitiator[responderHandshakeBytes + flip.offset] = flip.mask
        } else {
            flips.initiatorToResponder[initiatorHandshakeBytes + flip.offset] = flip.mask
        }
        let (initiatorStream, responderStream, _, ends) = Relay.connect(flips: flips)
        defer { for end in ends { end.close() } }
        let responderSide = ChannelBackground {
            try SecureChannel.respond(over: responderStream, staticKey: .generate(), hello: helloB, rekeyInterval: 3)
        }
        let initiator = try SecureChannel.initiate(over: initiatorStream, staticKey: .generate(), hello: helloA, rekeyInterval: 3)
        let responder = try responderSide.value(within: 30)
        defer { initiator.close(); responder.close() }
        let (sender, receiver) = flip.responderToInitiator ? (responder, initiator) : (initiator, responder)

        // Eight messages of one frame each; the later ones give a lengthened message bytes to eat.
        for id in 0..<8 as Range<UInt64> {
            try? sender.send(.message(id: id, body: patternBytes(100, seed: Int(id))))
        }
        let tampered = flip.offset / Self.messageWireSize
        for id in 0..<UInt64(tampered) {
            #expect(try receiver.receive(deadline: .now + .seconds(10)) == .message(id: id, body: patternBytes(100, seed: Int(id))))
        }
        let error = netError { () throws(NetError) in try receiver.receive(deadline: .now + .seconds(10)) }
        #expect(error == .authenticationFailed, "\(flip.name): \(String(describing: error))")
        // The channel stays failed and is closed.
        #expect(netError { () throws(NetError) in try receiver.receive(deadline: .now + .seconds(1)) } == .authenticationFailed)
        #expect(receiver.failure == .authenticationFailed)
        #expect(netError { () throws(NetError) in try receiver.send(.ping(1)) } == .authenticationFailed)
    }

    // MARK: Protocol violations and truncation

    @Test func frameOverItsLimitIsAProtocolViolation() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        // A valid ping, then a message header announcing 70,000 bytes (limit 65,548).
        let plaintext = FrameEncoder.encode(.ping(7)) + [FrameType.message.rawValue, 0x00, 0x01, 0x11, 0x70]
        try pair.initiator.sendRawPlaintext(plaintext)
        #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == .ping(7))
        let error = netError { () throws(NetError) in try pair.responder.receive(deadline: .now + .seconds(10)) }
        guard case let .protocolViolation(reason) = error else {
            Issue.record("expected protocolViolation, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("70000") || reason.contains("70,000"), "\(reason)")
        #expect(pair.responder.failure == error, "stays failed")
        #expect(netError { () throws(NetError) in try pair.responder.receive() } == error)
        // The responder closed its stream: the initiator sees the end.
        #expect(try pair.initiator.receive(deadline: .now + .seconds(10)) == nil)
    }

    @Test func unknownFrameTypeIsAProtocolViolation() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        try pair.initiator.sendRawPlaintext([0x7F, 0, 0, 0, 0])
        #expect(netError { () throws(NetError) in try pair.responder.receive(deadline: .now + .seconds(10)) }?.isProtocolViolation == true)
    }

    @Test func invalidLocalFrameIsRefusedAndTheChannelStaysUp() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        let tooBig = Frame.message(id: 1, body: [UInt8](repeating: 0, count: WireLimits.maxMessageBody + 1))
        #expect(netError { () throws(NetError) in try pair.initiator.send([.ping(1), tooBig]) }?.isProtocolViolation == true)
        #expect(pair.initiator.failure == nil)
        try pair.initiator.send(.ping(2))
        #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == .ping(2), "nothing of the refused call was sent")
    }

    @Test func cleanCloseAtABoundaryEndsTheStream() throws {
        let pair = try ChannelPair.make()
        try pair.initiator.send([.ping(1), .pong(2)])
        try pair.initiator.send(.close(code: .normal, reason: "bye"))
        pair.initiator.close()
        pair.initiator.close()  // idempotent
        #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == .ping(1))
        #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == .pong(2))
        #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == .close(code: .normal, reason: "bye"))
        #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == nil)
        #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == nil, "and again")
        #expect(netError { () throws(NetError) in try pair.initiator.send(.ping(3)) }?.isClosed == true)
        #expect(netError { () throws(NetError) in try pair.initiator.receive() }?.isClosed == true)
        pair.responder.close()
    }

    @Test func streamEndingInsideANoiseMessageIsTruncated() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        try pair.initiatorStream.write([0x00, 0x40] + patternBytes(10, seed: 5))  // 10 of 64 bytes
        pair.initiatorStream.shutdownWrite()
        let error = netError { () throws(NetError) in try pair.responder.receive(deadline: .now + .seconds(10)) }
        guard case let .closed(reason) = error else {
            Issue.record("expected closed, got \(String(describing: error))")
            return
        }
        #expect(reason.hasPrefix("truncated Noise message"), "\(reason)")
    }

    @Test func streamEndingInsideAFrameIsTruncated() throws {
        let pair = try ChannelPair.make()
        defer { pair.responder.close() }
        try pair.initiator.sendRawPlaintext(Array(FrameEncoder.encode(.ping(1)).prefix(7)))
        pair.initiator.close()
        let error = netError { () throws(NetError) in try pair.responder.receive(deadline: .now + .seconds(10)) }
        guard case let .closed(reason) = error else {
            Issue.record("expected closed, got \(String(describing: error))")
            return
        }
        #expect(reason.hasPrefix("truncated frame"), "\(reason)")
    }

    @Test func receiveTimeoutLeavesTheChannelUsable() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        let error = netError { () throws(NetError) in try pair.responder.receive(deadline: .now + .milliseconds(100)) }
        #expect(error?.isTimedOut == true)
        #expect(pair.responder.failure == nil)
        try pair.initiator.send(.ping(9))
        #expect(try pair.responder.receive(deadline: .now + .seconds(10)) == .ping(9))
    }

    @Test func closeWakesABlockedReceiver() async throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close() }
        let reader = ChannelBackground { try pair.responder.receive() }
        try await Task.sleep(for: .milliseconds(100))
        pair.responder.close()
        let error = try reader.netError(within: 10)
        #expect(error?.isClosed == true, "\(String(describing: error))")
    }

    /// A chunk streamed piece by piece arrives as the very frame `.chunk(id, index, data)`,
    /// between ordinary frames, whatever its size relative to the Noise messages.
    @Test(arguments: [0, 1, 65_000, 65_519 * 3 + 7, 1 << 20])
    func streamedChunkArrivesAsOneChunkFrame(size: Int) throws {
        let pair = try ChannelPair.make(rekeyInterval: 3)
        defer { pair.initiator.close(); pair.responder.close() }
        let id = try TransferID(Array(1...16))
        let data = patternBytes(size, seed: size + 3)
        let receiver = pair.responderReceives(3)
        try pair.initiator.send(.ping(1))
        var offsets: [Int] = []
        let failure: NetError? = try pair.initiator.sendChunk(id: id, index: 9, count: size) { (buffer, offset) throws(NetError) in
            offsets.append(offset)
            #expect(buffer.count <= WireLimits.maxNoisePlaintext)
            data.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + buffer.count)])) }
        }
        #expect(failure == nil)
        try pair.initiator.send(.ping(2))
        #expect(try receiver.value(within: 60) == [.ping(1), .chunk(id: id, index: 9, data: data), .ping(2)])
        #expect(offsets.first == (size == 0 ? nil : 0))
    }

    /// A chunk of a streamed manifest, sent the same way with its hash, arrives as the frame
    /// `.hashedChunk(id, index, hash, data)` (large ones filled in place by the reader).
    @Test(arguments: [1, 65_519 * 2 + 11, 1 << 20])
    func streamedHashedChunkArrivesAsOneFrame(size: Int) throws {
        let pair = try ChannelPair.make(rekeyInterval: 3)
        defer { pair.initiator.close(); pair.responder.close() }
        let id = try TransferID(Array(1...16))
        let hash = patternBytes(32, seed: size)
        let data = patternBytes(size, seed: size + 7)
        let receiver = pair.responderReceives(2)
        let failure: NetError? = try pair.initiator.sendHashedChunk(id: id, index: 3, hash: hash, count: size) {
            (buffer, offset) throws(NetError) in
            data.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + buffer.count)])) }
        }
        #expect(failure == nil)
        try pair.initiator.send(.ping(2))
        #expect(try receiver.value(within: 60) == [.hashedChunk(id: id, index: 3, hash: hash, data: data), .ping(2)])
    }

    /// A block answer streamed the same way arrives as the frame `.blockResponse(request, true, data)`.
    @Test(arguments: [1, 65_519 * 2 + 11, 1 << 20])
    func streamedBlockAnswerArrivesAsOneFrame(size: Int) throws {
        let pair = try ChannelPair.make(rekeyInterval: 3)
        defer { pair.initiator.close(); pair.responder.close() }
        let data = patternBytes(size, seed: size + 5)
        let receiver = pair.responderReceives(2)
        let failure: NetError? = try pair.initiator.sendBlockResponse(request: 41, count: size) { (buffer, offset) throws(NetError) in
            data.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + buffer.count)])) }
        }
        #expect(failure == nil)
        try pair.initiator.send(.ping(2))
        #expect(try receiver.value(within: 60) == [.blockResponse(request: 41, ok: true, data: data), .ping(2)])
    }

    /// A long block answer is many writes, and each is reported while the answer goes on
    /// (a stall check sees progress before the end, not only at it).
    @Test func writesWithinALongAnswerAreReportedAsTheyHappen() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        let writes = Atomic<Int>(0)
        pair.initiator.onWrite { writes.add(1, ordering: .relaxed) }
        let size = 4 << 20
        let receiver = pair.responderReceives(1)
        var seenByOffset: [Int: Int] = [:]
        let failure: NetError? = try pair.initiator.sendBlockResponse(request: 3, count: size) { (buffer, offset) throws(NetError) in
            seenByOffset[offset] = writes.load(ordering: .relaxed)
            buffer.initializeMemory(as: UInt8.self, repeating: 1)
        }
        #expect(failure == nil)
        try pair.initiator.flush()
        _ = try receiver.value(within: 60)
        let lastPiece = try #require(seenByOffset.keys.max())
        let batches = size / SecureChannel.writeBatch
        #expect(seenByOffset[lastPiece]! >= batches - 1,
                "\(seenByOffset[lastPiece]!) writes reported before the last piece of \(size) bytes was filled")
        #expect(writes.load(ordering: .relaxed) >= batches)
    }

    /// The observer stays the closure it was given, however many writes it saw: the 100,000th
    /// call runs as the first did (kept in a `Mutex` unboxed, each access wrapped it in two
    /// more thunks, and a long transfer's calls went deeper and deeper into the stack).
    @Test func theWriteObserverDoesNotGrowWithEveryWrite() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        let calls = Atomic<Int>(0)
        let deepest = Atomic<Int>(0)
        let first = Atomic<Int>(0)
        pair.initiator.onWrite {
            let count = calls.add(1, ordering: .relaxed).newValue
            // How far below the first call's frame this call runs (the stack grows down).
            var marker = 0
            let address = withUnsafeMutablePointer(to: &marker) { Int(bitPattern: $0) }
            if count == 1 { first.store(address, ordering: .relaxed) }
            deepest.store(max(deepest.load(ordering: .relaxed), first.load(ordering: .relaxed) - address), ordering: .relaxed)
        }
        let writes = 100_000
        let drain = ChannelBackground { () throws(NetError) -> Int in
            var frames = 0
            while frames < writes, try pair.responder.receive(deadline: .now + .seconds(60)) != nil { frames += 1 }
            return frames
        }
        for n in 0..<writes { try pair.initiator.send(.ping(UInt64(n))) }
        #expect(try drain.value(within: 120) == writes)
        #expect(calls.load(ordering: .relaxed) >= writes, "one write per unbatched frame")
        #expect(deepest.load(ordering: .relaxed) < 64 * 1024, "the last call ran \(deepest.load(ordering: .relaxed)) bytes deeper than the first")
    }

    /// A fill that fails mid-chunk: the rest of the chunk goes out as zeros (the frame
    /// stream stays intact), the error comes back, and the channel stays usable.
    @Test func failingFillSendsZerosAndReturnsTheError() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        let id = try TransferID(Array(1...16))
        let size = 200_000
        let receiver = pair.responderReceives(2)
        let failure: NetError? = try pair.initiator.sendChunk(id: id, index: 0, count: size) { (buffer, offset) throws(NetError) in
            if offset > 0 { throw .closed("the source went away") }
            buffer.initializeMemory(as: UInt8.self, repeating: 7)
        }
        #expect(failure == .closed("the source went away"))
        try pair.initiator.send(.ping(5))
        let frames = try receiver.value(within: 60)
        guard frames.count == 2, case let .chunk(_, _, data) = frames[0] else {
            Issue.record("unexpected frames \(frames.map(\.type))")
            return
        }
        let first = WireLimits.maxNoisePlaintext - FrameEncoder.chunkPrefix(id: id, index: 0, count: size).count
        #expect(data.count == size)
        #expect(data[..<first].allSatisfy { $0 == 7 })
        #expect(data[first...].allSatisfy { $0 == 0 })
        #expect(frames[1] == .ping(5))
    }
}

/// `sendUrgent`: the unreliable lane's way past bulk frames on the same channel.
@Suite struct UrgentFrameTests {
    /// One `send` of 200 large messages blocks on a full socket (nobody reads yet); an urgent
    /// ping sent meanwhile goes out at the writer's next frame boundary, long before the end
    /// of the batch, and every bulk frame still arrives once, in order.
    @Test func anUrgentFrameOvertakesABlockedBulkSend() throws {
        let pair = try ChannelPair.make()
        let body = patternBytes(60_000, seed: 5)
        let bulk = (0..<200).map { Frame.message(id: UInt64($0), body: body) }
        let writer = ChannelBackground { try pair.initiator.send(bulk) }
        Thread.sleep(forTimeInterval: 0.2)  // the writer fills the socket and blocks
        #expect(!writer.isFinished, "12 MB went into a socketpair nobody reads")
        let urgent = ChannelBackground { try pair.initiator.sendUrgent(.ping(42)) }
        Thread.sleep(forTimeInterval: 0.2)  // the urgent frame waits for the send lock
        var before = 0, next: UInt64 = 0, sawPing = false
        while let frame = try pair.responder.receive(deadline: .now + .seconds(60)) {
            switch frame {
            case .ping(42):
                sawPing = true
            case let .message(id, received):
                #expect(id == next && received == body)
                next += 1
                if !sawPing { before += 1 }
            default:
                Issue.record("unexpected \(frame)")
            }
            if next == 200 && sawPing { break }
        }
        try writer.value()
        try urgent.value()
        #expect(sawPing)
        #expect(before < 100, "the urgent frame waited behind \(before) of 200 bulk frames")
    }
}
