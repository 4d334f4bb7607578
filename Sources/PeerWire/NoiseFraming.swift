/// Encodes Noise messages for a TCP stream: each message is a 2-byte big-endian length
/// followed by that many bytes (at most ``WireLimits/maxNoiseMessage``). Zero-length messages
/// are legal at this layer.
package enum NoiseFraming {
    /// The message with its 2-byte length prefix.
    package static func frame(_ message: [UInt8]) throws(WireError) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(WireLimits.noiseLengthPrefixSize + message.count)
        try append(message, to: &output)
        return output
    }

    /// Appends the message with its 2-byte length prefix to `buffer` (to batch several messages
    /// into one write). Leaves `buffer` unchanged when the message is too long.
    package static func append(_ message: some Collection<UInt8>, to buffer: inout [UInt8]) throws(WireError) {
        let length = message.count
        guard length <= WireLimits.maxNoiseMessage else {
            throw .messageTooLarge(length: length, limit: WireLimits.maxNoiseMessage)
        }
        buffer.append(UInt8(truncatingIfNeeded: length >> 8))
        buffer.append(UInt8(truncatingIfNeeded: length))
        buffer.append(contentsOf: message)
    }
}

/// Splits a TCP byte stream into Noise messages, whatever the sizes of the pieces it arrives in.
///
/// ```swift
/// var reader = NoiseMessageReader()
/// reader.append(bytesFromSocket)
/// while let message = try reader.next() { try decrypt(message) }
/// ```
///
/// After an error the reader stays failed: ``next()`` throws the same error again.
package struct NoiseMessageReader: Sendable {
    private var input = InputBuffer()
    private var failure: WireError?
    private let maxMessageLength: Int

    /// A reader that accepts messages of at most `maxMessageLength` bytes (never more than
    /// ``WireLimits/maxNoiseMessage``, which the 2-byte prefix cannot exceed anyway). A smaller
    /// limit suits the handshake phase.
    package init(maxMessageLength: Int = WireLimits.maxNoiseMessage) {
        precondition(maxMessageLength >= 0, "a message length limit cannot be negative")
        self.maxMessageLength = min(maxMessageLength, WireLimits.maxNoiseMessage)
    }

    /// Bytes appended but not yet returned as messages.
    package var bufferedByteCount: Int { input.readableCount }

    /// The error that stopped this reader, if any.
    package var error: WireError? { failure }

    /// Adds bytes received from the stream. Ignored once the reader has failed.
    package mutating func append(_ bytes: some Collection<UInt8>) {
        guard failure == nil else { return }
        input.append(bytes)
    }

    /// Adds the bytes that `fill` writes into room for `maxCount` of them (a socket read
    /// straight into the buffer); `fill` returns the count written, or nil for none.
    /// Ignored once the reader has failed.
    package mutating func append(maxCount: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int?) {
        guard failure == nil else { return }
        _ = input.append(maxCount: maxCount, fill)
    }

    /// The next complete message, or `nil` if more bytes are needed.
    package mutating func next() throws(WireError) -> [UInt8]? {
        try withNextMessage { Array($0) }
    }

    /// Lends the next complete message to `body` (valid only inside it: no copy) and
    /// returns its result, or `nil` if more bytes are needed.
    package mutating func withNextMessage<R>(_ body: (UnsafeRawBufferPointer) -> R) throws(WireError) -> R? {
        if let failure { throw failure }
        guard input.readableCount >= WireLimits.noiseLengthPrefixSize else { return nil }
        let length = Int(input.byte(at: 0)) << 8 | Int(input.byte(at: 1))
        guard length <= maxMessageLength else {
            let error = WireError.messageTooLarge(length: length, limit: maxMessageLength)
            failure = error
            input.discardAll()
            throw error
        }
        guard input.readableCount >= WireLimits.noiseLengthPrefixSize + length else { return nil }
        _ = input.consume(WireLimits.noiseLengthPrefixSize)
        let range = input.consume(length)
        return input.storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }
}
