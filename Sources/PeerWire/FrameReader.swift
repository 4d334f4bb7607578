/// Decodes frames from the stream of decrypted Noise plaintexts, whatever the sizes of the
/// pieces it arrives in.
///
/// ```swift
/// var frames = FrameReader()
/// frames.append(plaintext)
/// while let frame = try frames.next() { handle(frame) }
/// ```
///
/// Limits are enforced as early as possible: an unknown type as soon as its first byte is in,
/// a body length outside the type's range as soon as the 5-byte header is in, before the body
/// arrives (nothing is allocated for an announced length until 64 KiB of the frame are in;
/// then room for the whole frame is reserved at once, so that a large frame is not copied
/// as the buffer grows). After an error the reader stays
/// failed: ``next()`` throws the same error again and appended bytes are dropped.
///
/// The data of a large `chunk`, `hashedChunk` or `blockResponse` frame is decrypted straight into the
/// array the frame returns: once 64 KiB of such a frame are in (the point where room for a
/// whole frame would be reserved) and its fields are consistent, the array is allocated at
/// the announced size, what is already buffered is moved into it, and every later message
/// that fits in what is missing is decrypted into it in place. Copying each chunk out of
/// the buffer was 6 % of a receiver's CPU.
package struct FrameReader: Sendable {
    private var input = InputBuffer()
    private var failure: WireError?
    /// The fields before the data of the frame whose data is filled in place, if any.
    private var direct: DirectHead?
    /// That frame's body length, checked against `maxBody` again on every `next()`, as the
    /// header of a frame in the buffer is (a connection may lower the limit meanwhile).
    private var directBodyLength = 0
    /// That frame's data: `directFilled` of its bytes are in.
    private var directData: [UInt8] = []
    private var directFilled = 0

    private enum DirectHead {
        case chunk(id: TransferID, index: UInt32)
        case hashedChunk(id: TransferID, index: UInt32, hash: [UInt8])
        case blockResponse(request: UInt32, ok: Bool)

        var type: FrameType {
            switch self {
            case .chunk: .chunk
            case .hashedChunk: .hashedChunk
            case .blockResponse: .blockResponse
            }
        }

        /// Bytes of the frame before its data (header, fields, length prefix): the header and
        /// the shortest body of its type, the one with no data.
        var prefixCount: Int { WireLimits.frameHeaderSize + WireLimits.bodyLengthRange(of: type).lowerBound }
    }
    /// The largest body accepted, below the type's own limit: a connection lowers it while
    /// the peer is not trusted yet (it then may only send small frames).
    package var maxBody = WireLimits.maxFrameBody

    package init() {}

    /// Bytes appended but not yet returned as frames.
    package var bufferedByteCount: Int {
        input.readableCount + (direct.map { $0.prefixCount + directFilled } ?? 0)
    }

    /// Bytes the reader holds allocated (read, unread and room): at most about two frames.
    package var allocatedByteCount: Int { input.storage.count + directData.count }

    /// The error that stopped this reader, if any.
    package var error: WireError? { failure }

    /// Adds decrypted plaintext. Ignored once the reader has failed.
    package mutating func append(_ bytes: some Collection<UInt8>) {
        guard failure == nil else { return }
        input.append(bytes)
        fillDirectFromInput()
    }

    /// Adds the plaintext that `fill` writes into room for `maxCount` bytes (it returns
    /// the count written, or nil when it produced nothing, e.g. a message that failed to
    /// decrypt). Returns false when `fill` returned nil. Nothing is added once the reader
    /// has failed.
    package mutating func append(maxCount: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int?) -> Bool {
        guard failure == nil else { return true }
        if direct != nil && maxCount <= directData.count - directFilled {
            let start = directFilled
            let written = directData.withUnsafeMutableBytes { raw in
                fill(UnsafeMutableRawBufferPointer(rebasing: raw[start..<(start + maxCount)]))
            }
            directFilled += min(max(written ?? 0, 0), maxCount)
            return written != nil
        }
        // No frame filled in place, or this plaintext runs past its end: into the buffer,
        // then the part that belongs to the frame's data is moved over.
        let appended = input.append(maxCount: maxCount, fill)
        fillDirectFromInput()
        return appended
    }

    /// Moves buffered bytes into the data filled in place, up to its end.
    private mutating func fillDirectFromInput() {
        guard direct != nil else { return }
        let count = min(directData.count - directFilled, input.readableCount)
        guard count > 0 else { return }
        let range = input.consume(count)
        let start = directFilled
        directData.withUnsafeMutableBytes { target in
            input.storage.withUnsafeBytes { source in
                (target.baseAddress! + start).copyMemory(from: source.baseAddress! + range.lowerBound, byteCount: count)
            }
        }
        directFilled += count
    }

    /// The next complete frame, or `nil` if more bytes are needed.
    package mutating func next() throws(WireError) -> Frame? {
        if let failure { throw failure }
        do {
            return try decodeNext()
        } catch {
            failure = error
            input.discardAll()
            direct = nil
            directData = []
            throw error
        }
    }

    private mutating func decodeNext() throws(WireError) -> Frame? {
        if let head = direct {
            guard directBodyLength <= maxBody else {
                throw .frameTooLarge(type: head.type, length: directBodyLength, limit: maxBody)
            }
            guard directFilled == directData.count else { return nil }
            let data = directData
            direct = nil
            directData = []
            directFilled = 0
            switch head {
            case let .chunk(id, index): return .chunk(id: id, index: index, data: data)
            case let .hashedChunk(id, index, hash): return .hashedChunk(id: id, index: index, hash: hash, data: data)
            case let .blockResponse(request, ok): return .blockResponse(request: request, ok: ok, data: data)
            }
        }
        guard input.readableCount >= 1 else { return nil }
        let code = input.byte(at: 0)
        guard let type = FrameType(rawValue: code) else { throw .unknownFrameType(code) }

        guard input.readableCount >= WireLimits.frameHeaderSize else { return nil }
        var length = 0
        for offset in 1..<WireLimits.frameHeaderSize {
            length = length << 8 | Int(input.byte(at: offset))
        }
        try Self.checkBodyLength(length, of: type)
        guard length <= maxBody else { throw .frameTooLarge(type: type, length: length, limit: maxBody) }

        guard input.readableCount >= WireLimits.frameHeaderSize + length else {
            // Room for the whole (limit-checked) frame at once, but only once the peer has
            // sent a good part of it: a bare header allocates nothing.
            if input.readableCount >= Self.reserveAfter {
                if startDirect(type: type, length: length) { return nil }
                input.reserve(unreadCount: WireLimits.frameHeaderSize + length)
            }
            return nil
        }
        _ = input.consume(WireLimits.frameHeaderSize)
        var body = ByteReader(input.storage, range: input.consume(length))
        return try Frame.decodeBody(type: type, from: &body)
    }

    /// Bytes of a frame that must be in before room for all of it is reserved.
    static let reserveAfter = 64 * 1024

    /// Starts filling the data of the incomplete frame at the front of the buffer in
    /// place, if it is a `chunk`, `hashedChunk` or `blockResponse` whose fields decode and whose length
    /// prefix covers exactly the rest of its body (`length`, already checked against the
    /// limits). Any other frame is left to the buffer, and then decodes or fails exactly
    /// as it would have.
    private mutating func startDirect(type: FrameType, length: Int) -> Bool {
        guard type == .chunk || type == .hashedChunk || type == .blockResponse else { return false }
        let header = WireLimits.frameHeaderSize
        // The fields and the data's length prefix: the body of the type without data.
        let fields = WireLimits.bodyLengthRange(of: type).lowerBound
        var reader = ByteReader(input.storage, range: (input.readIndex + header)..<(input.readIndex + header + fields))
        let head: DirectHead
        let dataCount: Int
        do throws(WireError) {
            switch type {
            case .chunk:
                head = .chunk(id: try reader.transferID(), index: try reader.u32("chunk index"))
                dataCount = Int(try reader.u32("chunk"))
            case .hashedChunk:
                head = .hashedChunk(id: try reader.transferID(), index: try reader.u32("chunk index"), hash: try reader.bytes(32, "chunk hash"))
                dataCount = Int(try reader.u32("chunk"))
            default:
                head = .blockResponse(request: try reader.u32("block request id"), ok: try reader.flag("block response status"))
                dataCount = Int(try reader.u32("block data"))
            }
        } catch {
            return false
        }
        // (The frame is incomplete and at least 64 KiB of it are in, so the last two always
        // hold; they are kept as the conditions the moves below rely on.)
        guard dataCount <= WireLimits.maxChunk, header + length == head.prefixCount + dataCount,
              input.readableCount >= head.prefixCount, input.readableCount < head.prefixCount + dataCount
        else { return false }
        _ = input.consume(head.prefixCount)
        // Deliberately marked initialized before it is written: the bytes are UInt8, and
        // every one of them is written before the frame is returned (only once
        // `directFilled` reaches the count), so the array need not be zeroed first.
        directData = [UInt8](unsafeUninitializedCapacity: dataCount) { _, initialized in initialized = dataCount }
        directFilled = 0
        directBodyLength = length
        direct = head
        fillDirectFromInput()
        // All that was buffered is in the array now. A large arena kept from an earlier
        // frame goes: beside the array it would let a peer make us hold three large
        // frames' worth instead of two, and while the array fills nothing else would
        // release it.
        input.releaseIfEmpty()
        return true
    }

    static func checkBodyLength(_ length: Int, of type: FrameType) throws(WireError) {
        let allowed = WireLimits.bodyLengthRange(of: type)
        guard length <= allowed.upperBound else {
            throw .frameTooLarge(type: type, length: length, limit: allowed.upperBound)
        }
        guard length >= allowed.lowerBound else {
            throw .frameTooShort(type: type, length: length, minimum: allowed.lowerBound)
        }
    }
}

extension Frame {
    /// Decodes exactly one complete frame (for tests and tools; connections use ``FrameReader``).
    ///
    /// Throws ``WireError/truncated(field:)`` if the bytes end before the frame does, and
    /// ``WireError/trailingBytes(after:count:)`` if bytes follow it.
    package init(decoding bytes: some Collection<UInt8>) throws(WireError) {
        var reader = FrameReader()
        reader.append(bytes)
        guard let frame = try reader.next() else { throw .truncated(field: "frame") }
        let rest = reader.bufferedByteCount
        guard rest == 0 else { throw .trailingBytes(after: "\(frame.type) frame", count: rest) }
        self = frame
    }
}
