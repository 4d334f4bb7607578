import PeerWire
import Testing
import TestKit

/// Malformed input and the exact error it must produce.
struct BadInput: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var error: WireError
    var testDescription: String { name }
}

@Suite struct FrameReaderTests {
    static let malformed: [BadInput] = [
        BadInput(name: "type 0x00", bytes: [0x00, 0, 0, 0, 0], error: .unknownFrameType(0x00)),
        BadInput(name: "reserved type", bytes: [0x70], error: .unknownFrameType(0x70)),
        BadInput(name: "type 0xFF", bytes: [0xFF], error: .unknownFrameType(0xFF)),
        BadInput(name: "ping body 9", bytes: frameBytes(0x01, body: pattern(9)),
                 error: .frameTooLarge(type: .ping, length: 9, limit: 8)),
        BadInput(name: "ping body 7", bytes: frameBytes(0x01, body: pattern(7)),
                 error: .frameTooShort(type: .ping, length: 7, minimum: 8)),
        BadInput(name: "pairing body 0", bytes: frameBytes(0x10, body: []),
                 error: .frameTooShort(type: .pairing, length: 0, minimum: 1)),
        BadInput(name: "pairing status 0", bytes: frameBytes(0x10, body: [0]),
                 error: .invalidValue(field: "pairing status", value: 0)),
        BadInput(name: "pairing status 6", bytes: frameBytes(0x10, body: [6]),
                 error: .invalidValue(field: "pairing status", value: 6)),
        BadInput(name: "close reason truncated", bytes: frameBytes(0x03, body: [0, 0, 0, 5] + [0x61, 0x62, 0x63, 0x64]),
                 error: .truncated(field: "close reason")),
        BadInput(name: "close trailing bytes", bytes: frameBytes(0x03, body: [0, 0, 0, 2] + [0x61, 0x62, 0x63, 0x64]),
                 error: .trailingBytes(after: "close frame body", count: 2)),
        BadInput(name: "close reason bad UTF-8", bytes: frameBytes(0x03, body: [0, 0, 0, 2, 0xFF, 0xFE]),
                 error: .invalidUTF8(field: "close reason")),
        BadInput(name: "close reason escape", bytes: frameBytes(0x03, body: [0, 0, 0, 1, 0x1B]),
                 error: .controlCharacter(field: "close reason")),
        BadInput(name: "close reason length 513", bytes: frameBytes(0x03, body: [0, 0, 0x02, 0x01] + pattern(512)),
                 error: .fieldTooLong(field: "close reason", length: 513, limit: 512)),
        BadInput(name: "message body length over limit",
                 bytes: frameBytes(0x20, body: pattern(8) + [0, 1, 0, 1] + pattern(65_536)),
                 error: .fieldTooLong(field: "message body", length: 65_537, limit: 65_536)),
        BadInput(name: "message body truncated", bytes: frameBytes(0x20, body: pattern(8) + [0, 0, 0, 3, 1, 2]),
                 error: .truncated(field: "message body")),
        BadInput(name: "message trailing byte", bytes: frameBytes(0x20, body: pattern(8) + [0, 0, 0, 0, 9]),
                 error: .trailingBytes(after: "message frame body", count: 1)),
        BadInput(name: "stream name empty", bytes: frameBytes(0x30, body: [0, 0, 0, 1, 0, 0x61]),
                 error: .fieldTooShort(field: "stream name", length: 0, minimum: 1)),
        BadInput(name: "stream name overlong NUL", bytes: frameBytes(0x30, body: [0, 0, 0, 1, 2, 0xC0, 0x80]),
                 error: .invalidUTF8(field: "stream name")),
        BadInput(name: "stream name surrogate", bytes: frameBytes(0x30, body: [0, 0, 0, 1, 3, 0xED, 0xA0, 0x80]),
                 error: .invalidUTF8(field: "stream name")),
        BadInput(name: "stream name cut inside a character", bytes: frameBytes(0x30, body: [0, 0, 0, 1, 1, 0xC3]),
                 error: .invalidUTF8(field: "stream name")),
        BadInput(name: "stream open body 5", bytes: frameBytes(0x30, body: [0, 0, 0, 1, 0]),
                 error: .frameTooShort(type: .streamOpen, length: 5, minimum: 6)),
        BadInput(name: "stream data length mismatch", bytes: frameBytes(0x31, body: [0, 0, 0, 1, 0, 0, 0, 2, 7]),
                 error: .truncated(field: "stream data")),
        BadInput(name: "stream close body 5", bytes: frameBytes(0x32, body: pattern(5)),
                 error: .frameTooLarge(type: .streamClose, length: 5, limit: 4)),
    ]

    @Test(arguments: malformed)
    func malformedInputIsRejected(input: BadInput) {
        var reader = FrameReader()
        reader.append(input.bytes)
        #expect(throws: input.error) { try reader.next() }
    }

    /// For each type, a header one byte over its maximum (and a huge one) is rejected with only the
    /// 5 header bytes appended: nothing waits for, or allocates, the announced body.
    @Test(arguments: FrameType.allCases)
    func headerOverLimitIsRejectedBeforeTheBody(type: FrameType) {
        let limit = WireLimits.bodyLengthRange(of: type).upperBound
        for length in [limit + 1, WireLimits.maxFrameBody, WireLimits.maxFrameBody + 1, Int(UInt32.max)] where length > limit {
            var reader = FrameReader()
            reader.append(frameBytes(type.rawValue, length: length, body: []))
            #expect(throws: WireError.frameTooLarge(type: type, length: length, limit: limit)) {
                try reader.next()
            }
            #expect(reader.bufferedByteCount == 0)
        }
    }

    @Test func unknownTypeIsRejectedOnItsFirstByte() {
        var reader = FrameReader()
        reader.append([0x7F])
        #expect(throws: WireError.unknownFrameType(0x7F)) { try reader.next() }
    }

    @Test func readerStaysFailedAfterAnError() throws {
        var reader = FrameReader()
        reader.append(FrameEncoder.encode(.ping(1)) + [0x99])
        #expect(try reader.next() == .ping(1))
        #expect(throws: WireError.unknownFrameType(0x99)) { try reader.next() }
        reader.append(FrameEncoder.encode(.ping(2)))
        #expect(throws: WireError.unknownFrameType(0x99)) { try reader.next() }
        #expect(reader.error == .unknownFrameType(0x99))
        #expect(reader.bufferedByteCount == 0)
    }

    @Test func singleFrameDecodingRejectsIncompleteAndTrailingInput() {
        let ping = FrameEncoder.encode(.ping(5))
        #expect(throws: WireError.truncated(field: "frame")) { try Frame(decoding: ping.dropLast()) }
        #expect(throws: WireError.truncated(field: "frame")) { try Frame(decoding: []) }
        #expect(throws: WireError.trailingBytes(after: "ping frame", count: 1)) { try Frame(decoding: ping + [0]) }
    }

    @Test func manyFramesOneByteAtATime() throws {
        var rng = SplitMix64(seed: 1)
        let frames = randomFrames(300, maxBody: 200, using: &rng)
        let stream = encodeAll(frames)
        var reader = FrameReader()
        var decoded: [Frame] = []
        for (index, byte) in stream.enumerated() {
            reader.append(CollectionOfOne(byte))
            while let frame = try reader.next() { decoded.append(frame) }
            if index < stream.count - 1 { #expect(decoded.count < frames.count) }
        }
        #expect(decoded == frames)
        #expect(reader.bufferedByteCount == 0)
    }

    @Test(arguments: 0..<25)
    func manyFramesAtRandomSplitPoints(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed))
        let frames = randomFrames(400, maxBody: 3_000, using: &rng)
        let stream = encodeAll(frames)
        let maxPiece = [1, 7, 100, 5_000, 70_000][seed % 5]
        let result = decodeFrames(stream, cuts: randomCuts(count: stream.count, maxPiece: maxPiece, using: &rng))
        #expect(result.error == nil)
        #expect(result.frames == frames)
    }

    /// Frames bigger than one Noise plaintext arrive in several pieces; each frame appears exactly
    /// when its last piece does.
    @Test func framesLargerThanOneNoisePlaintext() throws {
        let frames: [Frame] = [
            .message(id: 1, body: pattern(WireLimits.maxMessageBody)),
            .ping(3),
            .streamData(id: 2, bytes: pattern(WireLimits.maxStreamData)),
            .message(id: 2, body: pattern(WireLimits.maxNoisePlaintext)),
        ]
        let stream = encodeAll(frames)
        var reader = FrameReader()
        var decoded: [Frame] = []
        var ends: [Int] = []  // stream offset at which each frame came out
        var offset = 0
        while offset < stream.count {
            let end = min(offset + WireLimits.maxNoisePlaintext, stream.count)
            reader.append(stream[offset..<end])
            offset = end
            while let frame = try reader.next() {
                decoded.append(frame)
                ends.append(offset)
            }
        }
        #expect(decoded == frames)
        var frameEnd = 0
        for (frame, end) in zip(frames, ends) {
            frameEnd += FrameEncoder.encode(frame).count
            let pieceEnd = min((frameEnd + WireLimits.maxNoisePlaintext - 1) / WireLimits.maxNoisePlaintext
                * WireLimits.maxNoisePlaintext, stream.count)
            #expect(end == pieceEnd, "\(frame) appears with the piece that completes it")
        }
    }

    /// Appends `stream` the way a secure channel does (each piece written by a `fill` into
    /// the room the reader offers), in pieces that end at `cuts`; returns the frames, the
    /// error if decoding failed, the address each piece was written to, and the bytes left
    /// buffered.
    static func fillFrames(_ stream: [UInt8], cuts: [Int]) -> (frames: [Frame], error: WireError?, written: [(offset: Int, address: UInt)], buffered: Int) {
        var reader = FrameReader()
        var frames: [Frame] = []
        var written: [(offset: Int, address: UInt)] = []
        var start = 0
        for end in cuts + [stream.count] where end > start {
            let ok = reader.append(maxCount: end - start) { room in
                room.copyBytes(from: stream[start..<end])
                written.append((start, UInt(bitPattern: room.baseAddress)))
                return end - start
            }
            #expect(ok)
            start = end
            do {
                while let frame = try reader.next() { frames.append(frame) }
            } catch {
                return (frames, error, written, reader.bufferedByteCount)
            }
        }
        return (frames, nil, written, reader.bufferedByteCount)
    }

    static func largeData(_ frame: Frame) -> [UInt8]? {
        switch frame {
        case let .chunk(_, _, data), let .blockResponse(_, _, data), let .hashedChunk(_, _, _, data): data
        default: nil
        }
    }

    /// The data of a large chunk or block response is decrypted into the array the frame
    /// returns: a piece in the middle of a frame's data is written inside that array, not
    /// into a buffer it is later copied out of.
    @Test(arguments: [WireLimits.maxNoisePlaintext, 1_000, 70_000])
    func largeChunkDataIsWrittenInPlace(piece: Int) throws {
        let frames: [Frame] = [
            .chunk(id: sampleTransferID, index: 0, data: pattern(1 << 20)),
            .ping(1),
            .chunk(id: sampleTransferID, index: 1, data: pattern(300_000).reversed()),
            .chunk(id: sampleTransferID, index: 2, data: pattern(1 << 20).map { $0 ^ 0x5A }),
            .blockResponse(request: 7, ok: true, data: pattern(200_000)),
            .blockResponse(request: 8, ok: false, data: pattern(100_000)),
            .chunk(id: sampleTransferID, index: 3, data: pattern(70_000)),
            .hashedChunk(id: sampleTransferID, index: 4, hash: pattern(32), data: pattern(500_000).map { $0 ^ 0x33 }),
        ]
        let stream = encodeAll(frames)
        let cuts = Array(stride(from: piece, to: stream.count, by: piece))
        let result = Self.fillFrames(stream, cuts: cuts)
        #expect(result.error == nil && result.buffered == 0)
        #expect(result.frames == frames)
        var frameStart = 0
        var checked = 0
        for frame in frames {
            let encoded = FrameEncoder.encode(frame).count
            defer { frameStart += encoded }
            guard let data = Self.largeData(frame), data.count >= 200_000,
                  let decoded = result.frames.first(where: { $0 == frame }),
                  let decodedData = Self.largeData(decoded) else { continue }
            // A piece wholly inside the data, well after the first 64 KiB of the frame (from
            // there on its plaintexts are written in place).
            guard let inside = result.written.first(where: {
                $0.offset >= frameStart + 128 * 1024 && $0.offset + piece <= frameStart + encoded
            }) else { continue }
            checked += 1
            decodedData.withUnsafeBytes { raw in
                let base = UInt(bitPattern: raw.baseAddress)
                let expected = base + UInt(inside.offset - (frameStart + encoded - data.count))
                #expect(inside.address == expected, "piece at \(inside.offset) was written into the frame's own data")
            }
        }
        #expect(checked >= 3, "pieces inside large frames were checked")
    }

    /// Large chunk frames at random piece boundaries, through both ways of appending,
    /// between small frames: every frame comes out whole and in order.
    @Test(arguments: 0..<8)
    func largeFramesAtRandomSplitPoints(seed: Int) {
        var rng = SplitMix64(seed: UInt64(1_000 + seed))
        var frames = randomFrames(40, maxBody: 2_000, using: &rng)
        for k in 0..<6 {
            let size = Int.random(in: 60_000...400_000, using: &rng)
            let frame: Frame = k % 2 == 0
                ? .chunk(id: .random(), index: UInt32(k), data: rng.bytes(size))
                : .blockResponse(request: UInt32(k), ok: Bool.random(using: &rng), data: rng.bytes(size))
            frames.insert(frame, at: Int.random(in: 0...frames.count, using: &rng))
        }
        let stream = encodeAll(frames)
        let cuts = randomCuts(count: stream.count, maxPiece: [100, 5_000, 70_000, 300_000][seed % 4], using: &rng)
        let filled = Self.fillFrames(stream, cuts: cuts)
        #expect(filled.error == nil && filled.buffered == 0)
        #expect(filled.frames == frames)
        let appended = decodeFrames(stream, cuts: cuts)
        #expect(appended.error == nil)
        #expect(appended.frames == frames)
    }

    /// A large frame whose fields do not add up is not filled in place: once all of it is in
    /// it fails as any frame does. Until then it waits, however it arrives.
    @Test(arguments: [WireLimits.maxNoisePlaintext, 4_096])
    func inconsistentLargeFramesFailOnceComplete(piece: Int) {
        let data = pattern(200_000)
        let cases: [(bytes: [UInt8], error: WireError)] = [
            (frameBytes(0x50, body: sampleTransferID.bytes + [0, 0, 0, 1] + [0, 0x01, 0x86, 0xA0] + data),   // says 100,000
             .trailingBytes(after: "chunk frame body", count: 100_000)),
            (frameBytes(0x50, body: sampleTransferID.bytes + [0, 0, 0, 1] + [0, 0x04, 0x93, 0xE0] + data),   // says 300,000
             .truncated(field: "chunk")),
            (frameBytes(0x65, body: [0, 0, 0, 9, 2] + [0, 0x03, 0x0D, 0x40] + data),                         // status 2
             .invalidValue(field: "block response status", value: 2)),
        ]
        for (bytes, error) in cases {
            let cuts = Array(stride(from: piece, to: bytes.count, by: piece))
            let partial = Self.fillFrames(Array(bytes.dropLast()), cuts: cuts)
            #expect(partial.error == nil && partial.frames.isEmpty && partial.buffered == bytes.count - 1)
            #expect(Self.fillFrames(bytes, cuts: cuts).error == error)
            #expect(decodeFrames(bytes, cuts: cuts).error == error)
        }
    }

    /// A run of large frames that are not filled in place (accepts with a large bitmap)
    /// reuses one arena instead of allocating and zeroing one per frame; the first small
    /// frame that empties the buffer after them gives it back.
    @Test func consecutiveLargeFramesKeepTheirArenaUntilASmallOne() throws {
        let frames: [Frame] = (0..<3).map { .accept(id: sampleTransferID, have: pattern((1 << 20) - $0)) }
            + [.ping(1), .ping(2)]
        var reader = FrameReader()
        var allocatedAtStart: [Int] = []   // just after the first piece of each frame is in
        var decoded: [Frame] = []
        for frame in frames {
            let bytes = FrameEncoder.encode(frame)
            var offset = 0
            while offset < bytes.count {
                let end = min(offset + WireLimits.maxNoisePlaintext, bytes.count)
                reader.append(bytes[offset..<end])
                if offset == 0 { allocatedAtStart.append(reader.allocatedByteCount) }
                offset = end
                while let next = try reader.next() { decoded.append(next) }
            }
        }
        #expect(decoded == frames)
        #expect(allocatedAtStart[1] >= 1 << 20 && allocatedAtStart[2] == allocatedAtStart[1],
                "the second and third accept are read into the first one's arena: \(allocatedAtStart)")
        #expect(allocatedAtStart[3] == allocatedAtStart[1], "the arena is still there after the last accept")
        #expect(allocatedAtStart[4] < 1 << 20, "released once a small frame emptied the buffer: \(allocatedAtStart)")
    }

    /// A chunk filled in place after a large frame that kept its arena does not hold the
    /// arena too: at most the chunk's data and a few messages are allocated.
    @Test func aChunkFilledInPlaceReleasesAnEarlierArena() throws {
        let chunk = FrameEncoder.encode(.chunk(id: sampleTransferID, index: 0, data: pattern(4 << 20)))
        let stream = FrameEncoder.encode(.accept(id: sampleTransferID, have: pattern(1 << 20))) + chunk
        var reader = FrameReader()
        var offset = 0
        var peak = 0
        var decoded: [Frame] = []
        while offset < stream.count {
            let end = min(offset + WireLimits.maxNoisePlaintext, stream.count)
            reader.append(stream[offset..<end])
            offset = end
            while let next = try reader.next() { decoded.append(next) }
            if decoded.count == 1 { peak = max(peak, reader.allocatedByteCount) }
        }
        #expect(decoded.count == 2)
        #expect(peak <= (4 << 20) + 256 * 1024, "the accept's arena went when the chunk started filling: \(peak)")
    }

    /// A limit lowered while a frame is filled in place refuses it at the next call, as it
    /// does a frame in the buffer.
    @Test func aLoweredLimitRefusesAFrameFilledInPlace() {
        let stream = FrameEncoder.encode(.chunk(id: sampleTransferID, index: 0, data: pattern(1 << 20)))
        var reader = FrameReader()
        reader.append(stream[..<100_000])
        #expect((try? reader.next()) == .some(nil))
        reader.maxBody = 66_560
        #expect(throws: WireError.frameTooLarge(type: .chunk, length: stream.count - WireLimits.frameHeaderSize, limit: 66_560)) {
            try reader.next()
        }
    }

    /// What is buffered of a frame filled in place still counts as buffered (a stream that
    /// ends there reports a truncated frame of that many bytes).
    @Test func aFrameFilledInPlaceCountsAsBuffered() {
        let stream = FrameEncoder.encode(.chunk(id: sampleTransferID, index: 0, data: pattern(1 << 20)))
        var reader = FrameReader()
        var offset = 0
        while offset < stream.count - 1 {
            let end = min(offset + WireLimits.maxNoisePlaintext, stream.count - 1)
            reader.append(stream[offset..<end])
            offset = end
            #expect((try? reader.next()) == .some(nil))
            #expect(reader.bufferedByteCount == offset)
            #expect(reader.allocatedByteCount < (1 << 20) + 256 * 1024, "the data, plus at most a few messages")
        }
    }

    @Test func truncatedStreamYieldsCompleteFramesThenWaits() throws {
        let stream = encodeAll(sampleFrames)
        var boundaries: [Int] = []
        var total = 0
        for frame in sampleFrames {
            total += FrameEncoder.encode(frame).count
            boundaries.append(total)
        }
        for length in 0...stream.count {
            let result = decodeFrames(Array(stream[..<length]), cuts: [])
            #expect(result.error == nil)
            #expect(result.frames == Array(sampleFrames.prefix(boundaries.count { $0 <= length })))
        }
    }
}
