import PeerWire
import Testing

/// Exact encodings written out by hand, so that the wire format cannot drift silently.
struct FrameVector: Sendable, CustomTestStringConvertible {
    var frame: Frame
    var bytes: [UInt8]
    var testDescription: String { frame.description }
}

@Suite struct FrameKnownAnswerTests {
    static let vectors: [FrameVector] = [
        FrameVector(frame: .ping(0x0102_0304_0506_0708),
                    bytes: [0x01, 0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]),
        FrameVector(frame: .pong(0),
                    bytes: [0x02, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0]),
        FrameVector(frame: .close(code: .timeout, reason: "idle"),
                    bytes: [0x03, 0, 0, 0, 8, 0, 5, 0, 4, 0x69, 0x64, 0x6C, 0x65]),
        FrameVector(frame: .close(code: .unknown(0x1234), reason: ""),
                    bytes: [0x03, 0, 0, 0, 4, 0x12, 0x34, 0, 0]),
        FrameVector(frame: .pairing(.accepted),
                    bytes: [0x10, 0, 0, 0, 1, 0x02]),
        FrameVector(frame: .certificate([0x30, 0x82]),
                    bytes: [0x04, 0, 0, 0, 4, 0, 2, 0x30, 0x82]),
        FrameVector(frame: .message(id: 1, body: [0xAA, 0xBB]),
                    bytes: [0x20, 0, 0, 0, 14, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0xAA, 0xBB]),
        FrameVector(frame: .streamOpen(id: 7, name: "é"),
                    bytes: [0x30, 0, 0, 0, 7, 0, 0, 0, 7, 2, 0xC3, 0xA9]),
        FrameVector(frame: .streamData(id: .max, bytes: []),
                    bytes: [0x31, 0, 0, 0, 8, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]),
        FrameVector(frame: .streamClose(id: 258),
                    bytes: [0x32, 0, 0, 0, 4, 0, 0, 1, 2]),
        FrameVector(frame: .streamCredit(id: 3, bytes: 0x0002_0000),
                    bytes: [0x33, 0, 0, 0, 8, 0, 0, 0, 3, 0, 2, 0, 0]),
        FrameVector(frame: .streamReset(id: 4, reason: "no"),
                    bytes: [0x34, 0, 0, 0, 8, 0, 0, 0, 4, 0, 2, 0x6E, 0x6F]),
        FrameVector(frame: .indexBlocks(folder: "f", blocks: [[0xAB], [1, 2, 3]]),
                    bytes: [0x67, 0, 0, 0, 12, 1, 0x66, 0, 2, 0, 1, 0xAB, 0, 3, 1, 2, 3]),
        // id 00 01 … 0F, index 2, hash 32 × 0x11, 2 bytes of data: body 16 + 4 + 32 + 4 + 2 = 58.
        FrameVector(frame: .hashedChunk(id: try! TransferID(Array(0..<16)), index: 2,
                                        hash: [UInt8](repeating: 0x11, count: 32), data: [0xAB, 0xCD]),
                    bytes: [0x52, 0, 0, 0, 58] + Array(0..<16) + [0, 0, 0, 2] + [UInt8](repeating: 0x11, count: 32)
                        + [0, 0, 0, 2, 0xAB, 0xCD]),
        // id 00 01 … 0F, bytes 0x0102030405060708: body 16 + 8 = 24.
        FrameVector(frame: .resent(id: try! TransferID(Array(0..<16)), bytes: 0x0102_0304_0506_0708),
                    bytes: [0x45, 0, 0, 0, 24] + Array(0..<16) + [1, 2, 3, 4, 5, 6, 7, 8]),
        // version-request: request 7, folder "f", path "a", tree 1, before 5, version 0.
        FrameVector(frame: .versionRequest(request: 7, folder: "f", path: "a", tree: true, before: 5, version: 0),
                    bytes: [0x68, 0, 0, 0, 26, 0, 0, 0, 7, 1, 0x66, 0, 1, 0x61, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0]),
        // version-response: request 7, ok, 3 bytes of page.
        FrameVector(frame: .versionResponse(request: 7, ok: true, data: [0, 0, 0]),
                    bytes: [0x69, 0, 0, 0, 12, 0, 0, 0, 7, 1, 0, 0, 0, 3, 0, 0, 0]),
        // folder-selection: folder "f", paths "a" and "é/b": body 2 + 2 + 3 + 6 = 13.
        FrameVector(frame: .folderSelection(folder: "f", paths: ["a", "é/b"]),
                    bytes: [0x6A, 0, 0, 0, 13, 1, 0x66, 0, 2, 0, 1, 0x61, 0, 4, 0xC3, 0xA9, 0x2F, 0x62]),
        // The whole folder: no paths.
        FrameVector(frame: .folderSelection(folder: "f", paths: []),
                    bytes: [0x6A, 0, 0, 0, 4, 1, 0x66, 0, 0]),
        // chunk-have: folder "f", path "a", root 0x11…, 10 chunks, chunks 0, 2 and 9 held: body 2 + 3 + 32 + 4 + 2 = 43.
        FrameVector(frame: .chunkHave(folder: "f", path: "a", root: [UInt8](repeating: 0x11, count: 32), count: 10, bitmap: [0x05, 0x02]),
                    bytes: [0x6B, 0, 0, 0, 43, 1, 0x66, 0, 1, 0x61] + [UInt8](repeating: 0x11, count: 32) + [0, 0, 0, 10, 0x05, 0x02]),
        // growing-file: folder "f", path "a", scan 2, size 9, offset 4, one chunk of 5 bytes,
        // hash 0x22…: body 2 + 3 + 8 + 8 + 8 + 2 + 36 = 67.
        FrameVector(frame: .growingFile(folder: "f", path: "a", scan: 2, size: 9, offset: 4,
                                        chunks: [GrowingChunk(size: 5, hash: [UInt8](repeating: 0x22, count: 32))]),
                    bytes: [0x6C, 0, 0, 0, 67, 1, 0x66, 0, 1, 0x61, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9,
                            0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0, 5] + [UInt8](repeating: 0x22, count: 32)),
    ]

    @Test(arguments: vectors)
    func encodesToExactBytes(vector: FrameVector) {
        #expect(FrameEncoder.encode(vector.frame) == vector.bytes)
    }

    @Test(arguments: vectors)
    func decodesFromExactBytes(vector: FrameVector) throws {
        #expect(try Frame(decoding: vector.bytes) == vector.frame)
    }

    @Test func typeCodesAreStable() {
        let codes = FrameType.allCases.map { ($0.description, $0.rawValue) }
        #expect(codes.map(\.0) == ["ping", "pong", "close", "certificate", "pairing", "message",
                                   "stream-open", "stream-data", "stream-close", "stream-credit", "stream-reset",
                                   "offer", "accept", "decline", "cancel", "done", "resent", "chunk", "chunk-ack", "hashed-chunk",
                                   "share-offer", "share-answer", "index-update", "index-ack", "block-request", "block-response",
                                   "block-delta-request", "index-blocks", "version-request", "version-response", "folder-selection",
                                   "chunk-have", "growing-file"])
        #expect(codes.map(\.1) == [0x01, 0x02, 0x03, 0x04, 0x10, 0x20, 0x30, 0x31, 0x32, 0x33, 0x34,
                                   0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x50, 0x51, 0x52, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67,
                                   0x68, 0x69, 0x6A, 0x6B, 0x6C])
        #expect(PairingStatus.allCases.map(\.rawValue) == [1, 2, 3, 4, 5])
        let closeCodes: [CloseCode] = [.normal, .protocolError, .authFailed, .notPaired,
                                       .impersonation, .timeout, .shuttingDown, .unpaired, .tryLater]
        #expect(closeCodes.map(\.rawValue) == [0, 1, 2, 3, 4, 5, 6, 7, 8])
    }

    @Test func limitsAreStable() {
        #expect(WireLimits.maxNoiseMessage == 65_535)
        #expect(WireLimits.maxNoisePlaintext == 65_519)
        #expect(WireLimits.maxFrameBody == 16_778_240)
        #expect(WireLimits.maxMessageBody == 65_536)
        let ranges = FrameType.allCases.map { WireLimits.bodyLengthRange(of: $0) }
        #expect(ranges == [8...8, 8...8, 4...516, 3...2_050, 1...1, 12...65_548, 6...260, 8...65_544, 4...4, 8...8, 6...518,
                           23...16_778_240, 20...1_048_596, 18...530, 18...530, 19...531, 24...24, 24...16_777_240, 21...21,
                           56...16_777_272, 3...321, 5...580, 7...16_778_240, 10...73, 53...4_211, 9...16_777_225, 55...12_405, 4...16_778_240,
                           26...4_184, 9...14_680_073, 4...4_098_067, 42...135_271, 31...41_053])
        #expect(ranges.allSatisfy { $0.upperBound <= WireLimits.maxFrameBody })
    }

    @Test func encoderAppendsToExistingBuffer() {
        var buffer: [UInt8] = [0xEE]
        FrameEncoder.append(.pairing(.refused), to: &buffer)
        FrameEncoder.append(.streamClose(id: 258), to: &buffer)
        #expect(buffer == [0xEE, 0x10, 0, 0, 0, 1, 0x05, 0x32, 0, 0, 0, 4, 0, 0, 1, 2])
    }
}
