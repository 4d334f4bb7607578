package import PeerCrypto
package import PeerWire
internal import Synchronization

/// An encrypted, authenticated channel of typed frames between two devices, over any
/// `ByteStream` (TCP or Unix socket).
///
/// ## Protocol
///
/// ```
///  prologue "syncpeer/4", Noise_XX_25519_AESGCM_SHA256, each message framed by NoiseFraming
///  1  initiator → responder   e                  payload: protocol version u16 BE, 4 (in the clear)
///  2  responder → initiator   e, ee, s, es       payload: the responder's Hello (encrypted)
///  3  initiator → responder   s, se              payload: the initiator's Hello (encrypted)
///  then both ways: Noise transport messages (2-byte length + ciphertext + tag) whose
///  plaintexts, concatenated in order, are the frame stream (FrameEncoder / FrameReader)
/// ```
///
/// Frames are not aligned with Noise messages: one message may hold many small frames
/// (frames given to one `send` call are coalesced, and so are those of calls marked `more`
/// with the next call's), and a large frame spans several.
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
/// - **Any number of senders**: `send` and `sendChunk` may be called from any thread; calls
///   are serialised by a `Mutex`, so the frames of one call are never interleaved with those
///   of another. Both reuse two fixed buffers per channel (plaintext of one Noise message,
///   ciphertext of up to `writeBatch` bytes): sending allocates nothing per frame or chunk.
///   What a send marked `more` leaves waits for the next send or `flush()`: a frame queued
///   before a slow send (a block read from a slow disk inside the lock) then waits for that
///   send's first write, at most `writeBatch` bytes later. `finishSending` and `close` drop
///   what waits: flush first.
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
package final class SecureChannel: Sendable {
    /// The wire protocol version this implementation speaks: the Noise suite and prologue
    /// below, message 1's payload, and the version in the hellos (the same number as
    /// `Hello.currentProtocolVersion`, as which it is defined). Each older version
    /// (`olderVersions`) is refused by name, in its own protocol.
    package static let protocolVersion: UInt16 = Hello.currentProtocolVersion
    /// The Noise prologue: ASCII `syncpeer/4`. Both sides mix it into the handshake, so a
    /// peer speaking another protocol (or version of it) fails the handshake.
    package static let prologue: [UInt8] = versionPrologue(protocolVersion)

    /// The prologue of protocol `version`: ASCII `syncpeer/<version>`.
    static func versionPrologue(_ version: UInt16) -> [UInt8] { Array("syncpeer/\(version)".utf8) }

    /// An older protocol version, known only to tell its peers, in their own protocol, that
    /// this device speaks another: a responder answers its message 1 with a message 2 of
    /// its suite and prologue carrying this device's hello, whose version it checks.
    struct OlderVersion: Sendable {
        let version: UInt16
        /// Its Noise suite.
        let protocolName: String
        /// What its initiator sends as message 1's payload.
        let message1Payload: [UInt8]
        var prologue: [UInt8] { SecureChannel.versionPrologue(version) }
    }

    /// The older versions, oldest first. Version 1: `Noise_XX_25519_ChaChaPoly_BLAKE2b`,
    /// prologue `syncpeer/1`, an empty message 1. Version 2: this version's suite, prologue
    /// `syncpeer/2`, message 1 carrying 2; it hashed chunks and manifests with BLAKE2b-256.
    /// Version 3: the same, carrying 3, with SHA-256 content hashes, where version 4 uses
    /// BLAKE3.
    static let olderVersions: [OlderVersion] = [
        OlderVersion(version: 1, protocolName: NoiseHandshake.xxVersion1ProtocolName, message1Payload: []),
        OlderVersion(version: 2, protocolName: NoiseHandshake.xxProtocolName, message1Payload: payloadNaming(2)),
        OlderVersion(version: 3, protocolName: NoiseHandshake.xxProtocolName, message1Payload: payloadNaming(3)),
    ]
    /// The largest handshake message accepted: room for the largest hello plus keys and tags.
    package static let maxHandshakeMessage = 61_000
    /// Bytes asked of the stream per read once the channel is up.
    static let readSize = 256 * 1024
    /// Ciphertext collected before a write, when one `send` carries many frames.
    static let writeBatch = 256 * 1024

    /// The peer's static X25519 key, learned and authenticated in the handshake.
    package let remoteStaticKey: PublicKey
    /// The peer's device ID (derived from `remoteStaticKey`).
    package let remoteDeviceID: DeviceID
    /// The peer's hello (display name, version, features, context, listen port).
    package let remoteHello: Hello
    /// The final Noise handshake hash `h` (64 bytes), identical on both ends.
    package let handshakeHash: [UInt8]
    /// Six decimal digits derived from `handshakeHash`: equal on both ends if and only if
    /// no one is in the middle (see `ShortAuthenticationString`).
    package let shortAuthenticationString: String
    /// Messages per direction between two rekeys (0: never rekey).
    package let rekeyInterval: UInt64

    private let stream: any ByteStream
    /// nil while the channel is usable; else why it is not.
    private let status = Mutex<NetError?>(nil)
    private let sender: Mutex<SendState>
    private let receiver: Mutex<ReceiveState>
    /// Frames `sendUrgent` put ahead of everything not yet encrypted: whoever sends next
    /// (a bulk frame's writer, or the urgent sender itself) writes them first.
    private let urgent = Mutex<[Frame]>([])

    /// The sending direction: cipher and buffers reused across calls.
    private struct SendState {
        let cipher: NoiseCipherState
        var messageCount: UInt64 = 0
        let buffers = SendBuffers()
    }

    /// Two fixed buffers, allocated once per channel: the plaintext of the Noise message
    /// being filled, and the framed ciphertext not yet written (encrypted straight into it).
    private final class SendBuffers {
        static let outputCapacity = SecureChannel.writeBatch + WireLimits.noiseLengthPrefixSize + WireLimits.maxNoiseMessage
        let plaintext = UnsafeMutableRawPointer.allocate(byteCount: WireLimits.maxNoisePlaintext, alignment: 64)
        var plaintextCount = 0
        let output = UnsafeMutableRawPointer.allocate(byteCount: outputCapacity, alignment: 64)
        var outputCount = 0

        var plaintextSpace: Int { WireLimits.maxNoisePlaintext - plaintextCount }

        deinit {
            plaintext.deallocate()
            output.deallocate()
        }
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
    package var remoteDescription: String { stream.remoteDescription }

    /// The largest frame body `receive` accepts now (see `limitFrames(to:)`).
    private let frameLimit = Atomic<Int>(WireLimits.maxFrameBody)
    /// Called after each write that handed bytes to the stream (see `onWrite`). Boxed: a
    /// closure kept in a `Mutex` itself is reabstracted on every `withLock` access and written
    /// back wrapped in two more thunks, so each write made the next call one level deeper
    /// (0.15 CPU-s more for a 1 GiB send, and unbounded stack depth).
    private let writeObserver = Mutex<WriteObserver?>(nil)

    private final class WriteObserver: Sendable {
        let call: @Sendable () -> Void
        init(_ call: @escaping @Sendable () -> Void) { self.call = call }
    }

    /// Calls `observer` after every write of sealed messages to the stream, from the
    /// writing thread: a long send (a 16 MiB block answer, a large index page) is many
    /// writes of at most `writeBatch` bytes and some more, so whoever watches for a peer
    /// that stopped reading sees progress while the send goes on, not only at its end.
    /// The observer runs with the send lock held: it must be quick and must not send,
    /// flush or close on this channel (the lock is not reentrant). A second call replaces
    /// the first observer.
    package func onWrite(_ observer: @escaping @Sendable () -> Void) {
        let boxed = WriteObserver(observer)
        writeObserver.withLock { $0 = boxed }
    }

    /// Refuses (fails the channel on) frames whose body is larger than `bytes` from now on;
    /// `WireLimits.maxFrameBody` lifts the limit. Any thread, even while `receive` waits: for
    /// peers that may send only small frames until they are trusted.
    package func limitFrames(to bytes: Int) {
        frameLimit.store(min(bytes, WireLimits.maxFrameBody), ordering: .releasing)
    }

    /// Why the channel can no longer be used, or nil while it can.
    package var failure: NetError? { status.withLock { $0 } }

    /// Noise transport messages sent and received so far (for tests: coalescing, rekeying).
    /// Waits for a `receive` in progress to return.
    var messageCounts: (sent: UInt64, received: UInt64) {
        (sender.withLock { $0.messageCount }, receiver.withLock { $0.messageCount })
    }

    // MARK: Sending

    /// Sends one frame. See `send(_:)` for frames in bulk.
    package func send(_ frame: Frame) throws(NetError) {
        try send([frame])
    }

    /// Sends frames in order, coalesced into as few Noise messages as possible.
    ///
    /// Throws `protocolViolation` (and sends nothing) if a frame is invalid, e.g. over its
    /// size limit; throws the channel's failure if it has failed; a write error fails the
    /// channel. When it returns, every frame has been handed to the stream, unless `more`:
    /// then the last Noise message, partly filled, waits for the next send (any kind, which
    /// continues it) or `flush()`. A caller that passes `more` must make sure one follows.
    package func send(_ frames: [Frame], more: Bool = false) throws(NetError) {
        for frame in frames {
            do throws(WireError) {
                try frame.validate()
            } catch {
                throw .protocolViolation("cannot send an invalid \(frame.type) frame: \(error)")
            }
        }
        try sender.withLock { (state: inout SendState) throws(NetError) in
            try checkOpen()
            var encoded: [UInt8] = []
            for frame in frames {
                try appendUrgent(&state)
                encoded.removeAll(keepingCapacity: true)
                FrameEncoder.append(frame, to: &encoded)
                try appendPlaintext(encoded, &state)
            }
            if !more { try finishSend(&state) }
        }
    }

    /// Seals and writes what sends with `more` left waiting.
    package func flush() throws(NetError) {
        try sender.withLock { (state: inout SendState) throws(NetError) in
            try checkOpen()
            try finishSend(&state)
        }
    }

    /// Sends `frame` ahead of every frame that another thread is about to send: it goes out
    /// at the next frame boundary, between two bulk frames, even while a writer blocked on
    /// a full socket holds the send lock (that writer sends it, before its next frame).
    /// Returns once it is handed to the stream.
    package func sendUrgent(_ frame: Frame) throws(NetError) {
        do throws(WireError) {
            try frame.validate()
        } catch {
            throw .protocolViolation("cannot send an invalid \(frame.type) frame: \(error)")
        }
        urgent.withLock { $0.append(frame) }
        try sender.withLock { (state: inout SendState) throws(NetError) in
            try checkOpen()
            try appendUrgent(&state)
            try finishSend(&state)
        }
    }

    /// Takes the frames `sendUrgent` left and encodes them first.
    private func appendUrgent(_ state: inout SendState) throws(NetError) {
        let frames = urgent.withLock { pending -> [Frame] in
            defer { pending.removeAll() }
            return pending
        }
        var encoded: [UInt8] = []
        for frame in frames {
            encoded.removeAll(keepingCapacity: true)
            FrameEncoder.append(frame, to: &encoded)
            try appendPlaintext(encoded, &state)
        }
    }

    /// Sends one chunk frame (``Frame/chunk(id:index:data:)``) of `count` bytes without
    /// holding the chunk in memory: `fill(buffer, offset)` writes the chunk's bytes from
    /// `offset` on into `buffer` (at most one Noise message at a time), straight into the
    /// buffer that is then encrypted. The peer receives exactly the frame
    /// `.chunk(id, index, bytes)`.
    ///
    /// If `fill` throws, the rest of the frame is sent as zeros (the peer's hash check
    /// rejects the chunk, and the frame stream stays intact) and the error is returned; a
    /// failure of the channel itself is thrown.
    @discardableResult
    package func sendChunk<E: Error>(id: TransferID, index: UInt32, count: Int,
                                    fill: (UnsafeMutableRawBufferPointer, Int) throws(E) -> Void) throws(NetError) -> E? {
        guard count >= 0 && count <= WireLimits.maxChunk else {
            throw .protocolViolation("cannot send a chunk of \(count) bytes (at most \(WireLimits.maxChunk))")
        }
        return try sendStreamed(header: FrameEncoder.chunkPrefix(id: id, index: index, count: count), count: count, more: false,
                                fill: fill)
    }

    /// Sends one ``Frame/hashedChunk(id:index:hash:data:)`` of `count` bytes that `fill`
    /// writes as in ``sendChunk(id:index:count:fill:)``.
    @discardableResult
    package func sendHashedChunk<E: Error>(id: TransferID, index: UInt32, hash: [UInt8], count: Int,
                                          fill: (UnsafeMutableRawBufferPointer, Int) throws(E) -> Void) throws(NetError) -> E? {
        guard count >= 0 && count <= WireLimits.maxChunk, hash.count == 32 else {
            throw .protocolViolation("cannot send a chunk of \(count) bytes (at most \(WireLimits.maxChunk)) with a \(hash.count)-byte hash")
        }
        return try sendStreamed(header: FrameEncoder.hashedChunkPrefix(id: id, index: index, hash: hash, count: count), count: count,
                                more: false, fill: fill)
    }

    /// Sends a successful block answer (``Frame/blockResponse(request:ok:data:)`` with `ok`)
    /// of `count` bytes that `fill` writes as in ``sendChunk(id:index:count:fill:)``: straight
    /// from the file into the buffer that is encrypted, with the same handling of a `fill`
    /// that throws (zeros, which the asker's hash check rejects).
    @discardableResult
    package func sendBlockResponse<E: Error>(request: UInt32, count: Int, more: Bool = false,
                                            fill: (UnsafeMutableRawBufferPointer, Int) throws(E) -> Void) throws(NetError) -> E? {
        guard count >= 0 && count <= WireLimits.maxChunk else {
            throw .protocolViolation("cannot send a block of \(count) bytes (at most \(WireLimits.maxChunk))")
        }
        return try sendStreamed(header: FrameEncoder.blockResponsePrefix(request: request, count: count), count: count, more: more,
                                fill: fill)
    }

    /// Sends a successful block answer whose data is `bytes` (the block, hashed by the caller
    /// from these very bytes): each Noise message of it is encrypted straight from `bytes`, as
    /// ``sendChunk(id:index:hash:bytes:)`` does, never copied into the plaintext buffer.
    package func sendBlockResponse(request: UInt32, bytes: UnsafeRawBufferPointer, more: Bool = false) throws(NetError) {
        guard bytes.count <= WireLimits.maxChunk else {
            throw .protocolViolation("cannot send a block of \(bytes.count) bytes (at most \(WireLimits.maxChunk))")
        }
        let header = FrameEncoder.blockResponsePrefix(request: request, count: bytes.count)
        let _: Never? = try sendStreamed(header: header, count: bytes.count, more: more, source: bytes) { (_, _) throws(Never) in }
    }

    /// Sends one ``Frame/chunk(id:index:data:)`` (or, with a 32-byte `hash`,
    /// ``Frame/hashedChunk(id:index:hash:data:)``) whose data is `bytes`, e.g. a mapped
    /// file's: each Noise message of it is encrypted straight from `bytes` (the first one
    /// after the header and whatever waited in the plaintext buffer), never copied into
    /// that buffer.
    package func sendChunk(id: TransferID, index: UInt32, hash: [UInt8]?, bytes: UnsafeRawBufferPointer) throws(NetError) {
        guard bytes.count <= WireLimits.maxChunk, hash == nil || hash?.count == 32 else {
            throw .protocolViolation("cannot send a chunk of \(bytes.count) bytes (at most \(WireLimits.maxChunk)) with a \(hash?.count ?? 0)-byte hash")
        }
        let header = if let hash { FrameEncoder.hashedChunkPrefix(id: id, index: index, hash: hash, count: bytes.count) }
            else { FrameEncoder.chunkPrefix(id: id, index: index, count: bytes.count) }
        let _: Never? = try sendStreamed(header: header, count: bytes.count, more: false, source: bytes) { (_, _) throws(Never) in }
    }

    /// A frame of `header` then `count` bytes from `fill`, one Noise message at a time
    /// (`more` as in `send(_:more:)`); or from `source`, sealed straight from where it lies.
    private func sendStreamed<E: Error>(header: [UInt8], count: Int, more: Bool, source: UnsafeRawBufferPointer? = nil,
                                        fill: (UnsafeMutableRawBufferPointer, Int) throws(E) -> Void) throws(NetError) -> E? {
        try sender.withLock { (state: inout SendState) throws(NetError) -> E? in
            try checkOpen()
            try appendUrgent(&state)
            try appendPlaintext(header, &state)
            var failure: E?
            var done = 0
            while done < count {
                let buffers = state.buffers
                let piece = min(count - done, buffers.plaintextSpace)
                if let source {
                    // What waits in the plaintext buffer (the header), then the data where it lies.
                    try seal(UnsafeRawBufferPointer(start: buffers.plaintext, count: buffers.plaintextCount),
                             UnsafeRawBufferPointer(rebasing: source[done..<(done + piece)]), &state)
                    buffers.plaintextCount = 0
                    done += piece
                    continue
                }
                let target = UnsafeMutableRawBufferPointer(start: buffers.plaintext + buffers.plaintextCount, count: piece)
                if failure == nil {
                    do throws(E) { try fill(target, done) } catch { failure = error }
                }
                if failure != nil { target.initializeMemory(as: UInt8.self, repeating: 0) }
                buffers.plaintextCount += piece
                done += piece
                if buffers.plaintextSpace == 0 { try sealMessage(&state) }
            }
            if !more { try finishSend(&state) }
            return failure
        }
    }

    /// Encrypts and sends `plaintext` as exactly one Noise message, whatever it holds: the
    /// tests' way to send frame bytes the encoder would refuse.
    func sendRawPlaintext(_ plaintext: [UInt8]) throws(NetError) {
        precondition(plaintext.count <= WireLimits.maxNoisePlaintext)
        try sender.withLock { (state: inout SendState) throws(NetError) in
            try checkOpen()
            try finishSend(&state)   // what sends with `more` left comes first
            plaintext.withUnsafeBytes { state.buffers.plaintext.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(state.buffers.plaintext), byteCount: $0.count) }
            state.buffers.plaintextCount = plaintext.count
            try sealMessage(&state)
            try flush(&state)
        }
    }

    /// Copies `bytes` into the plaintext buffer, sealing each Noise message as it fills up
    /// (a partial one stays, to coalesce with the next frames).
    private func appendPlaintext(_ bytes: [UInt8], _ state: inout SendState) throws(NetError) {
        var offset = 0
        while offset < bytes.count {
            let buffers = state.buffers
            let piece = min(bytes.count - offset, buffers.plaintextSpace)
            bytes.withUnsafeBytes { raw in
                (buffers.plaintext + buffers.plaintextCount).copyMemory(from: raw.baseAddress! + offset, byteCount: piece)
            }
            buffers.plaintextCount += piece
            offset += piece
            if buffers.plaintextSpace == 0 { try sealMessage(&state) }
        }
    }

    /// Seals what is left of the plaintext and writes everything out.
    private func finishSend(_ state: inout SendState) throws(NetError) {
        if state.buffers.plaintextCount > 0 { try sealMessage(&state) }
        try flush(&state)
    }

    /// Encrypts the plaintext buffer as one Noise message straight into the output (after
    /// its 2-byte length), rekeys when the interval is reached, and writes the output once
    /// it holds `writeBatch` bytes.
    private func sealMessage(_ state: inout SendState) throws(NetError) {
        let buffers = state.buffers
        try seal(UnsafeRawBufferPointer(start: buffers.plaintext, count: buffers.plaintextCount),
                 UnsafeRawBufferPointer(start: nil, count: 0), &state)
        buffers.plaintextCount = 0
    }

    /// Encrypts `first` then `second` (together at most one message's plaintext) as one
    /// Noise message into the output, as `sealMessage` does with the plaintext buffer.
    private func seal(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer, _ state: inout SendState) throws(NetError) {
        let buffers = state.buffers
        let length = first.count + second.count + WireLimits.noiseTagSize  // ≤ 65,535 by construction
        let slot = buffers.output + buffers.outputCount
        slot.storeBytes(of: UInt8(truncatingIfNeeded: length >> 8), as: UInt8.self)
        (slot + 1).storeBytes(of: UInt8(truncatingIfNeeded: length), as: UInt8.self)
        do throws(CryptoError) {
            if second.isEmpty {
                try state.cipher.encrypt(first, into: slot + WireLimits.noiseLengthPrefixSize)
            } else {
                try state.cipher.encrypt(first, second, into: slot + WireLimits.noiseLengthPrefixSize)
            }
            state.messageCount += 1
            if rekeyInterval > 0 && state.messageCount % rekeyInterval == 0 {
                try state.cipher.rekey()
            }
        } catch {
            throw fail(.system(operation: "encrypt", reason: "\(error)"))
        }
        buffers.outputCount += WireLimits.noiseLengthPrefixSize + length
        if buffers.outputCount >= Self.writeBatch { try flush(&state) }
    }

    private func flush(_ state: inout SendState) throws(NetError) {
        let buffers = state.buffers
        guard buffers.outputCount > 0 else { return }
        do throws(NetError) {
            try stream.write(UnsafeRawBufferPointer(start: buffers.output, count: buffers.outputCount))
        } catch {
            throw fail(error)
        }
        buffers.outputCount = 0
        writeObserver.withLock { $0 }?.call()
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
    package func receive(deadline: ContinuousClock.Instant? = nil) throws(NetError) -> Frame? {
        try receiver.withLock { (state: inout ReceiveState) throws(NetError) -> Frame? in
            while true {
                try checkOpen()
                if state.atEnd { return nil }
                state.frames.maxBody = frameLimit.load(ordering: .acquiring)
                if let frame = try nextFrame(&state) { return frame }
                if try decryptNextMessage(&state) { continue }

                // Straight from the socket into the message reader's buffer.
                var readResult: Result<Int, NetError> = .success(0)
                state.messages.append(maxCount: Self.readSize) { room in
                    readResult = Result { () throws(NetError) in try stream.read(into: room, deadline: deadline) }
                    return try? readResult.get()
                }
                let count: Int
                do throws(NetError) {
                    count = try readResult.get()
                } catch {
                    if case .timedOut = error, failure == nil { throw error }
                    throw fail(error)
                }
                try checkOpen()  // closed locally while blocked
                if count == 0 {
                    if state.messages.bufferedByteCount > 0 {
                        throw fail(.closed("truncated Noise message: the stream ended after \(state.messages.bufferedByteCount) bytes of a transport message"))
                    }
                    if state.frames.bufferedByteCount > 0 {
                        throw fail(.closed("truncated frame: the stream ended after \(state.frames.bufferedByteCount) bytes of a frame"))
                    }
                    state.atEnd = true
                    return nil
                }
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
        let cipher = state.cipher
        var decrypted: Bool?
        do throws(WireError) {
            // The ciphertext is lent from the message reader and decrypted straight into
            // the frame reader's buffer: no array per message.
            decrypted = try state.messages.withNextMessage { ciphertext in
                guard ciphertext.count >= WireLimits.noiseTagSize else { return false }
                return state.frames.append(maxCount: ciphertext.count - WireLimits.noiseTagSize) { plaintext in
                    do throws(CryptoError) {
                        var scratch: UInt8 = 0  // an empty plaintext still needs a valid pointer
                        return try withUnsafeMutableBytes(of: &scratch) { one throws(CryptoError) in
                            try cipher.decrypt(ciphertext, into: plaintext.baseAddress ?? one.baseAddress!)
                        }
                    } catch {
                        return nil
                    }
                }
            }
        } catch {
            throw fail(.protocolViolation(error.description))
        }
        guard let decrypted else { return false }
        guard decrypted else { throw fail(.authenticationFailed) }
        state.messageCount += 1
        if rekeyInterval > 0 && state.messageCount % rekeyInterval == 0 {
            do throws(CryptoError) {
                try state.cipher.rekey()
            } catch {
                throw fail(.system(operation: "rekey", reason: "\(error)"))
            }
        }
        return true
    }

    // MARK: Closing

    /// Ends the sending direction after everything sent so far (TCP FIN): the peer reads
    /// our last frames and then the end of the stream, while we can still read what it
    /// sends. Closing at once instead could reset the connection and lose the last frames.
    package func finishSending() {
        stream.shutdownWrite()
    }

    /// Closes the channel and its stream (a blocked `receive` wakes up and throws `closed`).
    /// Idempotent.
    package func close() {
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
