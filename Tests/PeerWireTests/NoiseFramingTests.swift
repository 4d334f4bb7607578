import PeerWire
import Testing
import TestKit

@Suite struct NoiseFramingTests {
    @Test(arguments: [
        ([], [0x00, 0x00]),
        ([0xAB], [0x00, 0x01, 0xAB]),
        ([1, 2, 3], [0x00, 0x03, 1, 2, 3]),
    ] as [([UInt8], [UInt8])])
    func knownAnswer(message: [UInt8], expected: [UInt8]) throws {
        #expect(try NoiseFraming.frame(message) == expected)
    }

    @Test func lengthPrefixIsBigEndian() throws {
        let framed = try NoiseFraming.frame(pattern(0x0102))
        #expect(Array(framed.prefix(2)) == [0x01, 0x02])
        #expect(framed.count == 0x0102 + 2)
    }

    @Test(arguments: [0, 1, 65_519, 65_534, WireLimits.maxNoiseMessage])
    func roundTripAtSizes(size: Int) throws {
        let message = pattern(size)
        var reader = NoiseMessageReader()
        reader.append(try NoiseFraming.frame(message))
        #expect(try reader.next() == message)
        #expect(try reader.next() == nil)
        #expect(reader.bufferedByteCount == 0)
    }

    @Test func messageOverLimitIsRejected() {
        #expect(throws: WireError.messageTooLarge(length: 65_536, limit: 65_535)) {
            try NoiseFraming.frame(pattern(65_536))
        }
        var buffer: [UInt8] = [9]
        #expect(throws: WireError.self) { try NoiseFraming.append(pattern(70_000), to: &buffer) }
        #expect(buffer == [9], "a failed append leaves the buffer unchanged")
    }

    @Test func zeroLengthMessagesAreLegal() throws {
        var reader = NoiseMessageReader()
        reader.append([0, 0, 0, 0, 0, 1, 7])
        #expect(try reader.next() == [])
        #expect(try reader.next() == [])
        #expect(try reader.next() == [7])
        #expect(try reader.next() == nil)
    }

    @Test func incrementalOneByteAtATimeAndRandomSplits() throws {
        var rng = SplitMix64(seed: 7)
        let messages = (0..<200).map { _ in rng.bytes(Int.random(in: 0...3_000, using: &rng)) }
            + [pattern(65_535), [], pattern(65_535)]
        var stream: [UInt8] = []
        for message in messages { try NoiseFraming.append(message, to: &stream) }

        // One byte at a time: a message appears exactly when its last byte arrives.
        var reader = NoiseMessageReader()
        var received: [[UInt8]] = []
        for byte in stream {
            reader.append(CollectionOfOne(byte))
            while let message = try reader.next() { received.append(message) }
        }
        #expect(received == messages)

        for _ in 0..<20 {
            var reader = NoiseMessageReader()
            var received: [[UInt8]] = []
            var start = 0
            for end in randomCuts(count: stream.count, maxPiece: 20_000, using: &rng) + [stream.count] {
                reader.append(stream[start..<end])
                start = end
                while let message = try reader.next() { received.append(message) }
            }
            #expect(received == messages)
            #expect(reader.bufferedByteCount == 0)
        }
    }

    @Test func partialMessageWaitsForMoreBytes() throws {
        var reader = NoiseMessageReader()
        reader.append([0x00])
        #expect(try reader.next() == nil)
        reader.append([0x03, 1, 2])
        #expect(try reader.next() == nil)
        #expect(reader.bufferedByteCount == 4)
        reader.append([3])
        #expect(try reader.next() == [1, 2, 3])
    }

    @Test func smallerLimitRejectsHeaderAndStaysFailed() throws {
        var reader = NoiseMessageReader(maxMessageLength: 100)
        reader.append([0x00, 100] + pattern(100))
        #expect(try reader.next() == pattern(100))
        reader.append([0x00, 101])  // header only: rejected before the body arrives
        let expected = WireError.messageTooLarge(length: 101, limit: 100)
        #expect(throws: expected) { try reader.next() }
        #expect(reader.error == expected)
        reader.append([0x00, 0x01, 0x05])
        #expect(throws: expected) { try reader.next() }
        #expect(reader.bufferedByteCount == 0)
    }
}
