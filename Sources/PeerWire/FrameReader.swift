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
public struct FrameReader: Sendable {
    private var input = InputBuffer()
    private var failure: WireError?
    /// The largest body accepted, below the type's own limit: a connection lowers it while
    /// the peer is not trusted yet (it then may only send small frames).
    public var maxBody = WireLimits.maxFrameBody

    public init() {}

    /// Bytes appended but not yet returned as frames.
    public var bufferedByteCount: Int { input.readableCount }

    /// Bytes the reader holds allocated (read, unread and room): at most about two frames.
    public var allocatedByteCount: Int { input.storage.count }

    /// The error that stopped this reader, if any.
    public var error: WireError? { failure }

    /// Adds decrypted plaintext. Ignored once the reader has failed.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        guard failure == nil else { return }
        input.append(bytes)
    }

    /// Adds the plaintext that `fill` writes into room for `maxCount` bytes (it returns
    /// the count written, or nil when it produced nothing, e.g. a message that failed to
    /// decrypt). Returns false when `fill` returned nil. Nothing is added once the reader
    /// has failed.
    public mutating func append(maxCount: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int?) -> Bool {
        guard failure == nil else { return true }
        return input.append(maxCount: maxCount, fill)
    }

    /// The next complete frame, or `nil` if more bytes are needed.
    public mutating func next() throws(WireError) -> Frame? {
        if let failure { throw failure }
        do {
            return try decodeNext()
        } catch {
            failure = error
            input.discardAll()
            throw error
        }
    }

    private mutating func decodeNext() throws(WireError) -> Frame? {
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
    public init(decoding bytes: some Collection<UInt8>) throws(WireError) {
        var reader = FrameReader()
        reader.append(bytes)
        guard let frame = try reader.next() else { throw .truncated(field: "frame") }
        let rest = reader.bufferedByteCount
        guard rest == 0 else { throw .trailingBytes(after: "\(frame.type) frame", count: rest) }
        self = frame
    }
}
