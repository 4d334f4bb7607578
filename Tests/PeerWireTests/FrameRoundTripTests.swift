import PeerModel
import PeerWire
import Testing

@Suite struct FrameRoundTripTests {
    /// Every frame type, with boundary sizes: empty, exactly at the limit, multi-byte text.
    static let validFrames: [Frame] = sampleFrames + [
        .message(id: .max, body: pattern(WireLimits.maxMessageBody)),
        .close(code: .shuttingDown, reason: String(repeating: "r", count: WireLimits.maxCloseReason)),
        .close(code: .authFailed, reason: String(repeating: "é", count: WireLimits.maxCloseReason / 2)),
        .close(code: .notPaired, reason: "line one\u{7E}"),
        .streamOpen(id: 0, name: "x"),
        .streamOpen(id: 2, name: String(repeating: "n", count: WireLimits.maxStreamName)),
        .streamOpen(id: 3, name: String(repeating: "🔑", count: 63) + "abc"),  // 255 bytes
        .streamData(id: 9, bytes: pattern(WireLimits.maxStreamData)),
        .streamClose(id: 0),
        .streamClose(id: .max),
        .chunk(id: sampleTransferID, index: 1, data: pattern(WireLimits.maxChunk)),
        .hashedChunk(id: sampleTransferID, index: .max, hash: pattern(32), data: pattern(WireLimits.maxChunk)),
        .offer(TransferOffer(id: sampleTransferID, kind: .file, name: String(repeating: "n", count: 255), entries: [
            .init(path: String(repeating: "d/", count: 2047) + "xy", size: .max, mode: 0o7777,
                  mtimeNanoseconds: .min, manifest: pattern(1000))])),
    ]

    /// The chunk prefix is exactly the start of the encoded chunk frame, data excluded.
    @Test(arguments: [0, 1, 65_536, WireLimits.maxChunk])
    func chunkPrefixIsTheFrameWithoutItsData(count: Int) {
        let data = pattern(count)
        let prefix = FrameEncoder.chunkPrefix(id: sampleTransferID, index: 77, count: count)
        #expect(prefix + data == FrameEncoder.encode(.chunk(id: sampleTransferID, index: 77, data: data)))
    }

    /// The same for a chunk with its hash.
    @Test(arguments: [0, 1, 65_536, WireLimits.maxChunk])
    func hashedChunkPrefixIsTheFrameWithoutItsData(count: Int) {
        let data = pattern(count)
        let hash = pattern(32).reversed().map { $0 }
        let prefix = FrameEncoder.hashedChunkPrefix(id: sampleTransferID, index: 77, hash: hash, count: count)
        #expect(prefix + data == FrameEncoder.encode(.hashedChunk(id: sampleTransferID, index: 77, hash: hash, data: data)))
    }

    /// The same for a successful block answer.
    @Test(arguments: [0, 1, 65_536, WireLimits.maxChunk])
    func blockResponsePrefixIsTheFrameWithoutItsData(count: Int) {
        let data = pattern(count)
        let prefix = FrameEncoder.blockResponsePrefix(request: 0xDEAD_BEEF, count: count)
        #expect(prefix + data == FrameEncoder.encode(.blockResponse(request: 0xDEAD_BEEF, ok: true, data: data)))
    }

    /// Offers that break a rule are refused by `validate()` with the field named.
    @Test(arguments: [
        (TransferOffer(id: sampleTransferID, kind: .file, name: "", entries: [.init(path: "a", size: 0, mode: 0, mtimeNanoseconds: 0, manifest: [])]),
         WireError.fieldTooShort(field: "offer name", length: 0, minimum: 1)),
        (TransferOffer(id: sampleTransferID, kind: .file, name: "x", entries: []),
         WireError.invalidValue(field: "entries of a single-file offer", value: 0)),
        (TransferOffer(id: sampleTransferID, kind: .folder, name: "x", entries: [.init(path: "a\u{0}b", size: 0, mode: 0, mtimeNanoseconds: 0, manifest: [])]),
         WireError.controlCharacter(field: "entry path")),
        (TransferOffer(id: sampleTransferID, kind: .folder, name: "x", entries: [.init(path: "a", size: 0, mode: 0o10000, mtimeNanoseconds: 0, manifest: [])]),
         WireError.invalidValue(field: "entry mode", value: 0o10000)),
    ])
    func invalidOffers(offer: TransferOffer, error: WireError) {
        #expect(throws: error) { try Frame.offer(offer).validate() }
    }

    @Test func chunkOverTheLimitIsRefusedOnTheHeader() throws {
        var header: [UInt8] = [FrameType.chunk.rawValue]
        let length = UInt32(24 + WireLimits.maxChunk + 1)
        header += withUnsafeBytes(of: length.bigEndian) { Array($0) }
        var reader = FrameReader()
        reader.append(header)
        #expect(throws: WireError.frameTooLarge(type: .chunk, length: Int(length), limit: 24 + WireLimits.maxChunk)) {
            try reader.next()
        }
    }

    /// Each field within its limit, the whole still over a frame: two index entries (or
    /// offer entries) with 9 MiB manifests. Refused before sending (the reader of such a
    /// frame must end the session); one of them alone is a valid frame.
    @Test func framesWhoseFieldsFitButWhoseBodyDoesNotAreRefused() throws {
        let manifest = [UInt8](repeating: 7, count: 9 << 20)
        let device = String(repeating: "A", count: 56)
        let entry = { (path: String) in
            SyncFileEntry(FileEntry(path: path, kind: .file, size: 1, mtimeNs: 0, mode: 0o644, version: [:],
                                    rootHash: [UInt8](repeating: 1, count: 32), modifiedBy: device, sequence: 1), manifest: manifest)
        }
        let two = Frame.indexUpdate(folder: "abcde-fghij", full: true, entries: [entry("a"), entry("b")])
        #expect(throws: WireError.self) { try two.validate() }
        try Frame.indexUpdate(folder: "abcde-fghij", full: true, entries: [entry("a")]).validate()
        let offerEntry = { (path: String) in TransferOffer.Entry(path: path, size: 1, mode: 0o644, mtimeNanoseconds: 0, manifest: manifest) }
        let offer = Frame.offer(TransferOffer(id: .random(), kind: .folder, name: "f", entries: [offerEntry("a"), offerEntry("b")]))
        #expect(throws: WireError.self) { try offer.validate() }
    }

    @Test func transferIDHexRoundTrip() throws {
        let id = TransferID.random()
        #expect(TransferID(hex: id.description) == id)
        #expect(TransferID(hex: id.description.uppercased()) == id)
        #expect(TransferID(hex: "xyz") == nil)
        #expect(throws: WireError.self) { try TransferID([1, 2, 3]) }
    }

    @Test(arguments: validFrames)
    func roundTrip(frame: Frame) throws {
        try frame.validate()
        let bytes = FrameEncoder.encode(frame)
        #expect(bytes.first == frame.type.rawValue)
        let announced = bytes[1..<5].reduce(0) { $0 << 8 | Int($1) }
        #expect(announced == bytes.count - WireLimits.frameHeaderSize)
        #expect(WireLimits.bodyLengthRange(of: frame.type).contains(announced))
        #expect(try Frame(decoding: bytes) == frame)
    }

    /// Frames one byte (or one field) past a limit: `validate()` rejects them, naming the field.
    @Test(arguments: [
        (.message(id: 1, body: pattern(65_537)),
         .fieldTooLong(field: "message body", length: 65_537, limit: 65_536)),
        (.streamData(id: 1, bytes: pattern(65_537)),
         .fieldTooLong(field: "stream data", length: 65_537, limit: 65_536)),
        (.close(code: .normal, reason: String(repeating: "r", count: 513)),
         .fieldTooLong(field: "close reason", length: 513, limit: 512)),
        (.close(code: .normal, reason: String(repeating: "é", count: 257)),
         .fieldTooLong(field: "close reason", length: 514, limit: 512)),
        (.close(code: .normal, reason: "bye\u{1B}[2J"), .controlCharacter(field: "close reason")),
        (.close(code: .normal, reason: "two\nlines"), .controlCharacter(field: "close reason")),
        (.streamOpen(id: 1, name: String(repeating: "n", count: 256)),
         .fieldTooLong(field: "stream name", length: 256, limit: 255)),
        (.streamOpen(id: 1, name: String(repeating: "🔑", count: 64)),
         .fieldTooLong(field: "stream name", length: 256, limit: 255)),
        (.streamOpen(id: 1, name: ""), .fieldTooShort(field: "stream name", length: 0, minimum: 1)),
        (.streamOpen(id: 1, name: "a\u{85}b"), .controlCharacter(field: "stream name")),
    ] as [(Frame, WireError)])
    func overLimitFramesAreRejectedByValidate(frame: Frame, expected: WireError) {
        #expect(throws: expected) { try frame.validate() }
    }

    @Test func closeCodesCompareByRawValue() throws {
        #expect(CloseCode.unknown(0) == .normal)
        #expect(CloseCode(rawValue: 6) == .shuttingDown)
        #expect(CloseCode(rawValue: 7) == .unpaired)
        #expect(CloseCode(rawValue: 8) == .tryLater)
        #expect(CloseCode(rawValue: 9) == .unknown(9))
        #expect(Set<CloseCode>([.unknown(3), .notPaired]).count == 1)
        // An unknown code from a newer peer is preserved through a round trip.
        let frame = try Frame(decoding: FrameEncoder.encode(.close(code: .unknown(0xFFFF), reason: "?")))
        guard case .close(.unknown(0xFFFF), "?") = frame else {
            Issue.record("unexpected \(frame)")
            return
        }
    }

    @Test func concatenatedFramesDecodeInOrder() throws {
        var reader = FrameReader()
        reader.append(encodeAll(Self.validFrames))
        var decoded: [Frame] = []
        while let frame = try reader.next() { decoded.append(frame) }
        #expect(decoded == Self.validFrames)
        #expect(reader.bufferedByteCount == 0)
    }
}
