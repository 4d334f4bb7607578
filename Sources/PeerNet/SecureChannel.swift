public import PeerCrypto
public import PeerWire
internal import Synchronization

/// An encrypted, authenticated channel of typed frames between two devices, over any
/// `ByteStream` (TCP or Unix socket).
///
/// ## Protocol
///
/// ```
///  prologue "syncpeer/1", Noise_XX_25519_ChaChaPoly_BLAKE2b, each message framed by NoiseFraming
///  1  initiator → responder   e                  payload empty (sent in the clear)
///  2  responder → initiator   e, ee, s, es       payload: the responder's Hello (encrypted)
///  3  initiator → responder   s, se              payload: the initiator's Hello (encrypted)
///  then both ways: Noise transport messages (2-byte length + ciphertext + tag) whose
///  plaintexts, concatenated in order, are the frame stream (FrameEncoder / FrameReader)
/// ```
///
/// Frames are not aligned with Noise messages: one message may hold many small frames
/// (frames given to one `send` call are coalesced), and a large frame spans several.
/// Each direction rekeys its cipher (Noise `Rekey()`) after every `rekeyInterval` messages;
/// both ends count the same messages, so no signalling is needed, but both must use the
/// same interval (the default, in practice).
///
/// After the handshake, check `remoteDeviceID` against the device you meant to reach (or
/// pin it), and on first contact let the users compare `shortAuthenticationString`.
///
/// ## Concurrency
///
/// `SecureChannel` is `Sendable`, with this contract:
/// - **One reader**: a single thread at a time calls `receive` (it blocks on the stream, so
///   run it on a dedicated thread, not on the Swift concurrency pool). Concurrent calls are
///   safe but serialised, which is rarely what a caller wants.
/// - **Any number of senders**: `send` may be called from any thread; calls are serialised
///   by a `Mutex`, so the frames of one call are never interleaved with those of another.
/// - `close` may be called from anywhere, at any time (also to wake a blocked `receive`).
///
/// ## Failure
///
/// The channel fails, closes its stream and stays failed on the first of: a message that
/// does not decrypt (`authenticationFailed`: it was modified in transit), a frame the
/// protocol forbids (`protocolViolation`), a stream that ends inside a message or frame
/// (`closed("truncated …")`), a failed write, or `close()`. Every later `send` or `receive`
/// throws the error that failed it. A `receive` that times out (`timedOut`) does not fail
/// the channel; call it again.
public final class SecureChannel: Sendable {
    /// The Noise prologue: ASCII `syncpeer/1`. Both sides mix it into the handshake, so a
    /// peer speaking another protocol (or version of it) fails the handshake.
    public static let prologue: [UInt8] = Array("syncpeer/1".utf8)
    /// The largest handshake message accepted: room for the largest hello plus keys and tags.
    public static let maxHandshakeMessage = 61_000
    /// Bytes asked of the stream per read once the channel is up.
    static let readSize = 256 * 1024
    /// Ciphertext collected before a write, when one `send` carries many frames.
    static let writeBatch = 256 * 1024

    /// The peer's static X25519 key, learned and authenticated in the handshake.
    public let remoteStaticKey: PublicKey
    /// The peer's device ID (derived from `remoteStaticKey`).
    public let remoteDeviceID: DeviceID
    /// The peer's hello (display name, version, features, context, listen port).
    public let remoteHello: Hello
    /// The final Noise handshake hash `h` (64 bytes), identical on both ends.
    public let handshakeHash: [UInt8]
    /// Six decimal digits derived from `handshakeHash`: equal on both ends if and only if
    /// no one is in the middle (see `ShortAuthenticationString`).
    public let shortAuthenticationString: String
    /// Messages per direction between two rekeys (0: never rekey).
    public let rekeyInterval: UInt64

    private let stream: any ByteStream
    /// nil while the channel is usable; else why it is not.
    private let status = Mutex<NetError?>(nil)
    private let sender: Mutex<SendState>
    private let receiver: Mutex<ReceiveState>

    /// The sending direction: cipher and buffers reused across calls.
    private struct SendState {
        let cipher: NoiseCipherState
        var messageCount: UInt64 = 0
        /// Encoded frames not yet encrypted.
        var plaintext: [UInt8] = []
        /// Framed ciphertext not yet written.
        var output: [UInt8] = []
    }

    /// The receiving direction.
    private struct ReceiveState {
        let cipher: NoiseCipherState
        var messageCount: UInt64 = 0
        var messages = NoiseMessageReader()
        var frames = FrameReader()
        /// The peer closed cleanly at a message and frame boundary.
        var atEnd = false
    }

    init(stream: any ByteStream, send: sending NoiseCipherState, receive: sending NoiseCipherState,
         remoteStaticKey: PublicKey, remoteHello: Hello, handshakeHash: [UInt8], rekeyInterval: UInt64) {
        self.stream = stream
        self.sender = Mutex(SendState(cipher: send))
        self.receiver = Mutex(ReceiveState(cipher: receive))
        self.remoteStaticKey = remoteStaticKey
        self.remoteDeviceID = DeviceID(publicKey: remoteStaticKey)
        self.remoteHello = remoteHello
        self.handshakeHash = handshakeHash
        self.shortAuthenticationString = ShortAuthenticationString.derive(handshakeHash: handshakeHash)
        self.rekeyInterval = rekeyInterval
    }

    /// The peer's address, for logs and events.
    public var remoteDescription: String { stream.remoteDescription }

    /// Why the channel can no longer be used, or nil while it can.
    public var failure: NetError? { status.withLock { $0 } }

    /// Noise transport messages sent and received so far (for tests: coalescing, rekeying).
    /// Waits for a `receive` in progress to return.
    var messageCounts: (sent: UInt64, received: UInt64) {
        (sender.withLock { $0.messageCount }, receiver.withLock { $0.messageCount })
    }

    // MARK: Sending

    /// Sends one frame. See `send(_:)` for frames in bulk.
    public func send(_ frame: Frame) throws(NetError) {
        try send([frame])
    }

    /// Sends frames in order, coalesced into as few Noise messages as possible.
    ///
    /// Throws `protocolViolation` (and sends nothing) if a frame is invalid, e.g. over its
    /// size limit; throws the channel's failure if it has failed; a write error fails the
    /// channel. When it returns, every frame has been handed to the stream.
    public func send(_ frames: [Frame]) throws(NetError) {
        for frame in frames {
            do throws(WireError) {
                try frame.validate()
            } catch {
                throw .protocolViolation("cannot send an invalid \(frame.type) frame: \(error)")
            }
        }
        try sender.withLock { (state: inout SendState) throws(NetError) in
            try checkOpen()
            state.plaintext.removeAll(keepingCapacity: true)
            state.output.removeAll(keepingCapacity: true)
            for frame in frames {
                FrameEncoder.append(frame, to: &state.plaintext)
                try sealFullMessages(&state)
                if state.output.count >= Self.writeBatch { try flush(&state) }
            }
            if !state.plaintext.isEmpty { try seal(count: state.plaintext.count, &state) }
            try flush(&state)
        }
    }

    /// Encrypts and sends `plaintext` as exactly one Noise message, whatever it holds: the
    /// tests' way to send frame bytes the encoder would refuse.
    func sendRawPlaintext(_ plaintext: [UInt8]) throws(NetError) {
        precondition(plaintext.count <= WireLimits.maxNoisePlaintext)
        try sender.withLock { (state: inout SendState) throws(NetError) in
            try checkOpen()
            state.plaintext = plaintext
            state.output.removeAll(keepingCapacity: true)
            try seal(count: plaintext.count, &state)
            try flush(&state)
        }
    }

    /// Encrypts every full-size Noise plaintext at the front of `state.plaintext`, keeping
    /// the remainder (less than one message) to coalesce with the next frames.
    private func sealFullMessages(_ state: inout SendState) throws(NetError) {
        let size = WireLimits.maxNoisePlaintext
        guard state.plaintext.count >= size else { return }
        var start = 0
        while state.plaintext.count - start >= size {
            try seal(range: start..<start + size, &state)
            start += size
        }
        state.plaintext.removeSubrange(0..<start)  // fewer than `size` bytes move
    }

    /// Encrypts the first `count` bytes of `state.plaintext` as one message and drops them.
    private func seal(count: Int, _ state: inout SendState) throws(NetError) {
        try seal(range: 0..<count, &state)
        state.plaintext.removeSubrange(0..<count)
    }

    /// Encrypts `state.plaintext[range]` as one Noise message, appends it (framed) to the
    /// output and rekeys when the interval is reached.
    private func seal(range: Range<Int>, _ state: inout SendState) throws(NetError) {
        do throws(CryptoError) {
            let ciphertext = try state.cipher.encrypt(state.plaintext[range])
            try? NoiseFraming.append(ciphertext, to: &state.output)  // ≤ 65,535 bytes by construction
            state.messageCount += 1
            if rekeyInterval > 0 && state.messageCount % rekeyInterval == 0 {
                try state.cipher.rekey()
            }
        } catch {
            throw fail(.system(operation: "encrypt", reason: "\(error)"))
        }
    }

    private func flush(_ state: inout SendState) throws(NetError) {
        guard !state.output.isEmpty else { return }
        do throws(NetError) {
            try stream.write(state.output)
        } catch {
            throw fail(error)
        }
        state.output.removeAll(keepingCapacity: true)
    }

    // MARK: Receiving

    /// The next frame from the peer, blocking until one is complete; nil when the peer
    /// closed the connection cleanly (at a message and frame boundary), also on every later
    /// call.
    ///
    /// - Parameter deadline: when to give up waiting with `timedOut` (the channel stays
    ///   usable); nil waits indefinitely.
    /// - Throws: `authenticationFailed` when a message was modified in transit (no frame of
    ///   that message is returned), `protocolViolation` for a forbidden frame, `closed` when
    ///   the stream ends inside a message or frame; each of these fails the channel.
    public func receive(deadline: ContinuousClock.Instant? = nil) throws(NetError) -> Frame? {
        try receiver.withLock { (state: inout ReceiveState) throws(NetError) -> Frame? in
            while true {
                try checkOpen()
                if state.atEnd { return nil }
                if let frame = try nextFrame(&state) { return frame }
                if try decryptNextMessage(&state) { continue }

                let bytes: [UInt8]
                do throws(NetError) {
                    bytes = try stream.read(maxCount: Self.readSize, deadline: deadline)
                } catch {
                    if case .timedOut = error, failure == nil { throw error }
                    throw fail(error)
                }
                try checkOpen()  // closed locally while blocked
                if bytes.isEmpty {
                    if state.messages.bufferedByteCount > 0 {
                        throw fail(.closed("truncated Noise message: the stream ended after \(state.messages.bufferedByteCount) bytes of a transport message"))
                    }
                    if state.frames.bufferedByteCount > 0 {
                        throw fail(.closed("truncated frame: the stream ended after \(state.frames.bufferedByteCount) bytes of a frame"))
                    }
                    state.atEnd = true
                    return nil
                }
                state.messages.append(bytes)
            }
        }
    }

    private func nextFrame(_ state: inout ReceiveState) throws(NetError) -> Frame? {
        do throws(WireError) {
            return try state.frames.next()
        } catch {
            throw fail(.protocolViolation(error.description))
        }
    }

    /// Decrypts the next buffered Noise message into the frame reader; false if no complete
    /// message is buffered.
    private func decryptNextMessage(_ state: inout ReceiveState) throws(NetError) -> Bool {
        let message: [UInt8]
        do throws(WireError) {
            guard let next = try state.messages.next() else { return false }
            message = next
        } catch {
            throw fail(.protocolViolation(error.description))
        }
        let plaintext: [UInt8]
        do throws(CryptoError) {
            plaintext = try state.cipher.decrypt(message)
        } catch {
            throw fail(.authenticationFailed)
        }
        state.messageCount += 1
        if rekeyInterval > 0 && state.messageCount % rekeyInterval == 0 {
            do throws(CryptoError) {
                try state.cipher.rekey()
            } catch {
                throw fail(.system(operation: "rekey", reason: "\(error)"))
            }
        }
        state.frames.append(plaintext)
        return true
    }

    // MARK: Closing

    /// Ends the sending direction after everything sent so far (TCP FIN): the peer reads
    /// our last frames and then the end of the stream, while we can still read what it
    /// sends. Closing at once instead could reset the connection and lose the last frames.
    public func finishSending() {
        stream.shutdownWrite()
    }

    /// Closes the channel and its stream (a blocked `receive` wakes up and throws `closed`).
    /// Idempotent.
    public func close() {
        status.withLock { status in
            if status == nil { status = .closed("the secure channel was closed") }
        }
        stream.close()
    }

    private func checkOpen() throws(NetError) {
        if let failure { throw failure }
    }

    /// Records `error` as the channel's failure (unless it already failed), closes the
    /// stream and returns the recorded failure, for the caller to throw.
    private func fail(_ error: NetError) -> NetError {
        let recorded = status.withLock { status in
            if status == nil { status = error }
            return status ?? error
        }
        stream.close()
        return recorded
    }
}
