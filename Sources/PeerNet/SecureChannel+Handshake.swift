package import PeerCrypto
package import PeerWire

extension SecureChannel {
    /// Runs the handshake as the side that connected (the Noise initiator).
    ///
    /// - Parameters:
    ///   - stream: a connected stream; the channel owns it from now on (it is closed when
    ///     the handshake fails or the channel closes).
    ///   - staticKey: this device's identity key.
    ///   - hello: what this device tells the peer (sent in message 3, encrypted).
    ///   - timeout: the whole handshake must finish within it, else `timedOut`.
    ///   - rekeyInterval: messages per direction between rekeys; both ends must agree.
    /// - Throws: `handshakeFailed` for a malformed, truncated or forged message, a hello
    ///   that does not decode or names another protocol version; `timedOut`; `closed` if
    ///   the peer hangs up between messages; stream errors.
    package static func initiate(over stream: any ByteStream, staticKey: KeyPair, hello: Hello,
                                timeout: Duration = .seconds(10),
                                rekeyInterval: UInt64 = 1 << 16) throws(NetError) -> SecureChannel {
        try handshake(role: .initiator, stream: stream, staticKey: staticKey, hello: hello,
                      timeout: timeout, rekeyInterval: rekeyInterval)
    }

    /// Runs the handshake as the side that accepted the connection (the Noise responder).
    /// Its hello goes in message 2; the initiator's arrives in message 3. See
    /// `initiate(over:staticKey:hello:timeout:rekeyInterval:)` for the parameters.
    package static func respond(over stream: any ByteStream, staticKey: KeyPair, hello: Hello,
                               timeout: Duration = .seconds(10),
                               rekeyInterval: UInt64 = 1 << 16) throws(NetError) -> SecureChannel {
        try handshake(role: .responder, stream: stream, staticKey: staticKey, hello: hello,
                      timeout: timeout, rekeyInterval: rekeyInterval)
    }

    private static func handshake(role: NoiseRole, stream: any ByteStream, staticKey: KeyPair, hello: Hello,
                                  timeout: Duration, rekeyInterval: UInt64) throws(NetError) -> SecureChannel {
        do throws(NetError) {
            do throws(WireError) {
                try hello.validate()
            } catch {
                throw NetError.handshakeFailed("this device's hello is invalid: \(error)")
            }
            var io = HandshakeIO(stream: stream, deadline: .now + timeout, timeout: timeout)
            let state = NoiseHandshake.xx(role: role, prologue: prologue, staticKey: staticKey)
            let remoteHello: Hello
            switch role {
            case .initiator:
                // Message 1 carries our protocol version in the clear (bound into the
                // handshake hash), so a responder of another version can refuse by name.
                try io.write(try step(1) { () throws(CryptoError) in try state.writeMessage(payload: versionPayload) })
                let message2: [UInt8]
                do throws(NetError) {
                    message2 = try io.readMessage(number: 2)
                } catch .closed(let why) {
                    // A responder of an older version refuses a message 1 naming ours (version
                    // 1 requires it empty, versions 2 and 3 to name their own) and hangs up
                    // without an answer.
                    let names = olderVersions.map { String($0.version) }
                    let older = names.dropLast().joined(separator: ", ") + (names.count > 1 ? " or " : "") + (names.last ?? "")
                    throw NetError.closed("\(why): a peer of an incompatible protocol version does this (an older protocol version, \(older), refuses a message 1 naming this device's version \(protocolVersion))")
                }
                remoteHello = try peerHello(try step(2) { () throws(CryptoError) in try state.readMessage(message2) },
                                            ours: hello)
                try io.write(try step(3) { () throws(CryptoError) in try state.writeMessage(payload: hello.encode()) })
            case .responder:
                let message1 = try io.readMessage(number: 1)
                let payload1 = try step(1) { () throws(CryptoError) in try state.readMessage(message1) }
                if let older = olderVersions.first(where: { $0.message1Payload == payload1 }) {
                    // An older version's initiator: answer in its own suite and prologue
                    // with our hello, so that it reports "the peer speaks protocol version
                    // 4" instead of a failed authentication or a hang-up, then refuse.
                    try refuse(older, message1: message1, io: io, staticKey: staticKey, hello: hello)
                }
                guard payload1 == versionPayload else {
                    let theirs = payload1.count == 2 ? "version \(UInt16(payload1[0]) << 8 | UInt16(payload1[1]))" : "an unknown version (a \(payload1.count)-byte version field)"
                    throw NetError.handshakeFailed("incompatible protocol version: the peer speaks protocol \(theirs), this device speaks version \(protocolVersion)")
                }
                try io.write(try step(2) { () throws(CryptoError) in try state.writeMessage(payload: hello.encode()) })
                let message3 = try io.readMessage(number: 3)
                remoteHello = try peerHello(try step(3) { () throws(CryptoError) in try state.readMessage(message3) },
                                            ours: hello)
            }
            guard let transport = state.transport, let remoteKey = transport.remoteStaticKey else {
                throw NetError.handshakeFailed("the handshake did not complete after three messages")
            }
            // The handshake state dies here and the two ciphers share no mutable state
            // (see NoiseTransport), so each can move into its own Mutex; the region checker
            // cannot see that they are independent, hence `nonisolated(unsafe)`.
            nonisolated(unsafe) let sendCipher = transport.send
            nonisolated(unsafe) let receiveCipher = transport.receive
            return SecureChannel(stream: stream, send: sendCipher, receive: receiveCipher,
                                 remoteStaticKey: remoteKey, remoteHello: remoteHello,
                                 handshakeHash: transport.handshakeHash, rekeyInterval: rekeyInterval)
        } catch {
            stream.close()
            throw error
        }
    }

    /// Message 1's payload: this implementation's protocol version, u16 big-endian.
    static var versionPayload: [UInt8] { payloadNaming(protocolVersion) }

    /// Message 1's payload naming `version`, u16 big-endian.
    static func payloadNaming(_ version: UInt16) -> [UInt8] { [UInt8(version >> 8), UInt8(version & 0xFF)] }

    /// Answers an older version's initiator's message 1 with that version's message 2 (its
    /// suite and prologue) carrying our hello, whose version the peer checks and refuses by
    /// name; then fails this handshake the same way. Message 2 reveals no more than any XX
    /// responder does (its static key and hello).
    private static func refuse(_ older: OlderVersion, message1: [UInt8], io: HandshakeIO, staticKey: KeyPair,
                               hello: Hello) throws(NetError) -> Never {
        let legacy = NoiseHandshake.xx(role: .responder, prologue: older.prologue, staticKey: staticKey,
                                       protocolName: older.protocolName)
        _ = try step(1) { () throws(CryptoError) in try legacy.readMessage(message1) }
        try io.write(try step(2) { () throws(CryptoError) in try legacy.writeMessage(payload: hello.encode()) })
        throw NetError.handshakeFailed("incompatible protocol version: the peer speaks protocol version \(older.version) (\(older.protocolName), prologue \(String(decoding: older.prologue, as: UTF8.self))), this device speaks version \(protocolVersion); it was told so in its own protocol")
    }

    /// Runs one Noise step, turning its error into `handshakeFailed` with the message number.
    private static func step(_ number: Int, _ body: () throws(CryptoError) -> [UInt8]) throws(NetError) -> [UInt8] {
        do throws(CryptoError) {
            return try body()
        } catch .authenticationFailed {
            throw .handshakeFailed("handshake message \(number) did not authenticate: it was modified in transit, or the peer uses another protocol or prologue")
        } catch {
            throw .handshakeFailed("handshake message \(number): \(error)")
        }
    }

    /// Decodes the peer's hello and checks that it speaks our hello's protocol version.
    private static func peerHello(_ payload: [UInt8], ours: Hello) throws(NetError) -> Hello {
        let hello: Hello
        do throws(WireError) {
            hello = try Hello.decode(payload)
        } catch {
            throw .handshakeFailed("peer hello: \(error)")
        }
        guard hello.protocolVersion == ours.protocolVersion else {
            throw .handshakeFailed("the peer speaks protocol version \(hello.protocolVersion), this device speaks version \(ours.protocolVersion)")
        }
        return hello
    }
}

/// Reads and writes handshake messages with a deadline for the whole handshake.
///
/// Reads exactly the bytes of each message (the length prefix, then the announced length),
/// never more, so that transport messages the initiator sends right after message 3 stay in
/// the stream for the channel.
private struct HandshakeIO {
    let stream: any ByteStream
    let deadline: ContinuousClock.Instant
    let timeout: Duration
    var reader = NoiseMessageReader(maxMessageLength: SecureChannel.maxHandshakeMessage)

    init(stream: any ByteStream, deadline: ContinuousClock.Instant, timeout: Duration) {
        self.stream = stream
        self.deadline = deadline
        self.timeout = timeout
    }

    func write(_ message: [UInt8]) throws(NetError) {
        let framed: [UInt8]
        do throws(WireError) {
            framed = try NoiseFraming.frame(message)
        } catch {
            throw .handshakeFailed("cannot frame a handshake message: \(error)")
        }
        try stream.write(framed)
    }

    mutating func readMessage(number: Int) throws(NetError) -> [UInt8] {
        let header = try readExactly(WireLimits.noiseLengthPrefixSize, number: number, messageLength: nil)
        reader.append(header)
        let length = Int(header[0]) << 8 | Int(header[1])
        do {
            if let message = try reader.next() { return message }  // a zero-length message
            reader.append(try readExactly(length, number: number, messageLength: length))
            guard let message = try reader.next() else {
                throw NetError.handshakeFailed("handshake message \(number) is incomplete")
            }
            return message
        } catch let error as WireError {
            throw .handshakeFailed("handshake message \(number): \(error)")
        } catch let error as NetError {
            throw error
        } catch {
            throw .handshakeFailed("handshake message \(number): \(error)")
        }
    }

    private func readExactly(_ count: Int, number: Int, messageLength: Int?) throws(NetError) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count {
            let chunk: [UInt8]
            do throws(NetError) {
                chunk = try stream.read(maxCount: count - bytes.count, deadline: deadline)
            } catch .timedOut {
                throw .timedOut("the secure handshake with \(stream.remoteDescription) did not finish within \(timeout) (waiting for message \(number))")
            }
            if chunk.isEmpty {
                if messageLength == nil && bytes.isEmpty {
                    throw .closed("the peer closed the connection before sending handshake message \(number)")
                }
                guard let messageLength else {
                    throw .handshakeFailed("handshake message \(number) is truncated: the connection ended inside its 2-byte length")
                }
                throw .handshakeFailed("handshake message \(number) is truncated: the connection ended after \(bytes.count) of its \(messageLength) bytes")
            }
            bytes += chunk
        }
        return bytes
    }
}
