/// Which side of a Noise handshake this party plays.
package enum NoiseRole: String, Sendable, Hashable {
    /// Sends the first handshake message.
    case initiator
    /// Receives the first handshake message.
    case responder

    var other: NoiseRole { self == .initiator ? .responder : .initiator }
}

/// The result of a completed handshake: one cipher per direction, the handshake hash and
/// what was learned of the peer.
///
/// The ciphers are classes confined to one task at a time (see `NoiseCipherState`); send
/// and receive may be used by two different tasks, since they share no state.
package struct NoiseTransport {
    /// Encrypts this party's outgoing transport messages.
    package let send: NoiseCipherState
    /// Decrypts the peer's transport messages.
    package let receive: NoiseCipherState
    /// The final handshake hash `h` (HASHLEN bytes: 64 for BLAKE2b, 32 for SHA-256): identical on both sides, usable for
    /// channel binding (e.g. signing it to prove possession of another key).
    package let handshakeHash: [UInt8]
    /// The peer's static public key, when the pattern involves one (learned during the
    /// handshake or known beforehand). Check it against the expected identity.
    package let remoteStaticKey: PublicKey?
}

/// A Noise `HandshakeState` (spec section 5.3) for any supported pattern, driven by
/// alternating `writeMessage` and `readMessage` calls.
///
/// Not thread-safe: a handshake belongs to one task at a time (transfer it with `sending`
/// or keep it inside an actor). After any error other than calling out of turn, the
/// handshake is abandoned, as the spec requires: further calls throw.
package final class NoiseHandshakeState {
    /// The protocol being run; its name is mixed into the handshake hash.
    package let protocolName: NoiseProtocolName
    /// This party's role.
    package let role: NoiseRole

    private let symmetric: NoiseSymmetricState
    private let localStatic: KeyPair?
    private var localEphemeral: KeyPair?
    /// The peer's static key: given for pre-message patterns, else learned from an `s`.
    package private(set) var remoteStaticKey: PublicKey?
    /// The peer's ephemeral key, once received.
    package private(set) var remoteEphemeralKey: PublicKey?
    private var psks: [SecureBytes]
    private var nextPSK = 0
    private var messageIndex = 0
    private var failure: String?
    /// The transport ciphers, set once the last handshake message was written or read.
    package private(set) var transport: NoiseTransport?

    /// Starts a handshake (`Initialize()`): mixes the prologue and pre-message keys.
    ///
    /// - Parameters:
    ///   - protocolName: e.g. `Noise_XX_25519_AESGCM_SHA256`.
    ///   - prologue: data both sides must agree on (e.g. a version string); a mismatch
    ///     makes the handshake fail.
    ///   - staticKeyPair: `s`, required when the pattern sends or pre-shares it.
    ///   - remoteStaticKey: `rs`, only for patterns where the peer's key is a
    ///     pre-message (e.g. the K in `IK`); otherwise it is learned during the handshake.
    ///   - preSharedKeys: one 32-byte key per `psk` token, in token order.
    ///   - ephemeralKeyPair: `e`, only for known-answer tests; normally generated.
    ///   - remoteEphemeralKey: `re`, only for patterns with an ephemeral pre-message.
    package init(protocolName: String, role: NoiseRole, prologue: [UInt8] = [],
                staticKeyPair: KeyPair? = nil, remoteStaticKey: PublicKey? = nil,
                preSharedKeys: [SecureBytes] = [], ephemeralKeyPair: KeyPair? = nil,
                remoteEphemeralKey: PublicKey? = nil) throws(CryptoError) {
        let parsed = try NoiseProtocolName(protocolName)
        let pattern = parsed.pattern
        self.protocolName = parsed
        self.role = role
        self.localStatic = staticKeyPair
        self.localEphemeral = ephemeralKeyPair
        self.remoteStaticKey = remoteStaticKey
        self.remoteEphemeralKey = remoteEphemeralKey
        self.psks = preSharedKeys
        self.symmetric = NoiseSymmetricState(protocolName: parsed.name, cipher: parsed.cipher, hash: parsed.hash)

        // Check the keys up front, so a misconfigured handshake fails before any message.
        let localPre = role == .initiator ? pattern.initiatorPreMessage : pattern.responderPreMessage
        let remotePre = role == .initiator ? pattern.responderPreMessage : pattern.initiatorPreMessage
        let sendsStatic = pattern.messages.enumerated().contains { i, tokens in
            Self.sender(ofMessage: i) == role && tokens.contains(.s)
        }
        if staticKeyPair == nil && (localPre.contains(.s) || sendsStatic) {
            throw .handshake("\(pattern.name) needs this party's static key pair (s) as \(role)")
        }
        if remotePre.contains(.s) && remoteStaticKey == nil {
            throw .handshake("\(pattern.name) needs the peer's static public key (rs) before the handshake")
        }
        if !remotePre.contains(.s) && remoteStaticKey != nil {
            throw .handshake("\(pattern.name) transmits the peer's static key; do not pass remoteStaticKey, check transport.remoteStaticKey after the handshake instead")
        }
        if localPre.contains(.e) && ephemeralKeyPair == nil {
            throw .handshake("\(pattern.name) needs this party's ephemeral key pair (e) as a pre-message")
        }
        if remotePre.contains(.e) && remoteEphemeralKey == nil {
            throw .handshake("\(pattern.name) needs the peer's ephemeral public key (re) as a pre-message")
        }
        guard preSharedKeys.count == pattern.pskCount else {
            throw .handshake("\(pattern.name) uses \(pattern.pskCount) pre-shared key(s), \(preSharedKeys.count) given")
        }
        for psk in preSharedKeys where psk.count != 32 {
            throw .invalidLength(what: "Noise pre-shared key", expected: 32, actual: psk.count)
        }

        symmetric.mixHash(prologue)
        // Pre-message keys are hashed initiator first, each side's in token order.
        for (owner, tokens) in [(NoiseRole.initiator, pattern.initiatorPreMessage), (.responder, pattern.responderPreMessage)] {
            for token in tokens {
                let key: PublicKey?
                switch token {
                case .s: key = owner == role ? staticKeyPair?.publicKey : remoteStaticKey
                case .e: key = owner == role ? ephemeralKeyPair?.publicKey : remoteEphemeralKey
                default: throw .handshake("token '\(token.rawValue)' is not allowed in a pre-message")
                }
                guard let key else { throw .handshake("missing pre-message key '\(token.rawValue)'") }
                symmetric.mixHash(key.bytes)
                if token == .e && pattern.isPSKHandshake { symmetric.mixKey(key.bytes) }
            }
        }
    }

    /// The handshake pattern being run.
    package var pattern: NoiseHandshakePattern { protocolName.pattern }

    /// True once all handshake messages have been processed (`transport` is then set).
    package var isComplete: Bool { transport != nil }

    /// True when the next call must be `writeMessage` (false: `readMessage`, or done).
    package var isMyTurnToWrite: Bool {
        !isComplete && failure == nil && Self.sender(ofMessage: messageIndex) == role
    }

    /// The current handshake hash `h` (HASHLEN bytes); final once the handshake is complete.
    package var handshakeHash: [UInt8] { symmetric.handshakeHash }

    /// `WriteMessage(payload)`: the next handshake message, carrying `payload` (encrypted
    /// once a key has been established; early payloads may be sent in the clear).
    package func writeMessage(payload: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        let tokens = try nextTokens(writing: true)
        do throws(CryptoError) {
            var message: [UInt8] = []
            for token in tokens {
                switch token {
                case .e:
                    let ephemeral = localEphemeral ?? KeyPair.generate()
                    localEphemeral = ephemeral
                    message += ephemeral.publicKey.bytes
                    symmetric.mixHash(ephemeral.publicKey.bytes)
                    if pattern.isPSKHandshake { symmetric.mixKey(ephemeral.publicKey.bytes) }
                case .s:
                    guard let localStatic else { throw CryptoError.handshake("token 's' needs this party's static key pair") }
                    message += try symmetric.encryptAndHash(localStatic.publicKey.bytes)
                case .ee, .es, .se, .ss:
                    try mixDH(token)
                case .psk:
                    try mixPSK()
                }
            }
            message += try symmetric.encryptAndHash(payload)
            guard message.count <= Noise.maxMessageLength else {
                throw CryptoError.handshake("handshake message of \(message.count) bytes exceeds the Noise maximum of \(Noise.maxMessageLength); send a smaller payload")
            }
            finishMessage()
            return message
        } catch {
            failure = "an earlier handshake step failed (\(error))"
            throw error
        }
    }

    /// `ReadMessage(message)`: processes the peer's next handshake message and returns its
    /// payload.
    package func readMessage(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let tokens = try nextTokens(writing: false)
        do throws(CryptoError) {
            guard message.count <= Noise.maxMessageLength else {
                throw CryptoError.handshake("handshake message of \(message.count) bytes exceeds the Noise maximum of \(Noise.maxMessageLength)")
            }
            var cursor = message[...]
            func take(_ count: Int, _ what: String) throws(CryptoError) -> ArraySlice<UInt8> {
                guard cursor.count >= count else {
                    throw .handshake("message \(messageIndex + 1) is too short: \(what) needs \(count) bytes, \(cursor.count) left")
                }
                let field = cursor.prefix(count)
                cursor = cursor.dropFirst(count)
                return field
            }
            for token in tokens {
                switch token {
                case .e:
                    let key = try PublicKey(try take(Noise.dhLength, "the peer's ephemeral key (e)"))
                    remoteEphemeralKey = key
                    symmetric.mixHash(key.bytes)
                    if pattern.isPSKHandshake { symmetric.mixKey(key.bytes) }
                case .s:
                    let length = Noise.dhLength + (symmetric.cipherState.hasKey ? Noise.tagLength : 0)
                    let field = try take(length, "the peer's static key (s)")
                    remoteStaticKey = try PublicKey(try symmetric.decryptAndHash(field))
                case .ee, .es, .se, .ss:
                    try mixDH(token)
                case .psk:
                    try mixPSK()
                }
            }
            if symmetric.cipherState.hasKey && cursor.count < Noise.tagLength {
                throw CryptoError.handshake("message \(messageIndex + 1) is too short: the payload needs at least a \(Noise.tagLength)-byte tag, \(cursor.count) bytes left")
            }
            let payload = try symmetric.decryptAndHash(cursor)
            finishMessage()
            return payload
        } catch {
            failure = "an earlier handshake step failed (\(error))"
            throw error
        }
    }

    /// Initiator sends the even-indexed messages (0, 2, …), responder the odd ones.
    private static func sender(ofMessage index: Int) -> NoiseRole {
        index % 2 == 0 ? .initiator : .responder
    }

    /// The tokens of the next message, after checking that it is this call's turn.
    /// Turn errors leave the state untouched: they are caller bugs, not protocol failures.
    private func nextTokens(writing: Bool) throws(CryptoError) -> [NoiseToken] {
        if let failure { throw .handshake(failure) }
        if isComplete {
            throw .handshake("the handshake is complete; use the transport ciphers for further messages")
        }
        let sender = Self.sender(ofMessage: messageIndex)
        if writing && sender != role {
            throw .handshake("out-of-turn write: message \(messageIndex + 1) of \(pattern.name) is sent by the \(sender), and this party is the \(role)")
        }
        if !writing && sender == role {
            throw .handshake("out-of-turn read: message \(messageIndex + 1) of \(pattern.name) is sent by this party (\(role)); call writeMessage")
        }
        return pattern.messages[messageIndex]
    }

    /// `ee`, `es`, `se`, `ss`: the first letter names the initiator's key, the second the
    /// responder's, so which of them is local depends on the role.
    private func mixDH(_ token: NoiseToken) throws(CryptoError) {
        let initiatorUsesStatic: Bool, responderUsesStatic: Bool
        switch token {
        case .ee: (initiatorUsesStatic, responderUsesStatic) = (false, false)
        case .es: (initiatorUsesStatic, responderUsesStatic) = (false, true)
        case .se: (initiatorUsesStatic, responderUsesStatic) = (true, false)
        case .ss: (initiatorUsesStatic, responderUsesStatic) = (true, true)
        default: throw .handshake("'\(token.rawValue)' is not a DH token")
        }
        let localIsStatic = role == .initiator ? initiatorUsesStatic : responderUsesStatic
        let remoteIsStatic = role == .initiator ? responderUsesStatic : initiatorUsesStatic
        guard let local = localIsStatic ? localStatic : localEphemeral else {
            throw .handshake("token '\(token.rawValue)' needs this party's \(localIsStatic ? "static key pair (s)" : "ephemeral key pair (e)"), which is missing")
        }
        guard let remote = remoteIsStatic ? remoteStaticKey : remoteEphemeralKey else {
            throw .handshake("token '\(token.rawValue)' needs the peer's \(remoteIsStatic ? "static key (rs)" : "ephemeral key (re)"), which has not been received")
        }
        let shared = try local.sharedSecret(with: remote)
        symmetric.mixKey(shared)
    }

    private func mixPSK() throws(CryptoError) {
        guard nextPSK < psks.count else { throw .handshake("no pre-shared key left for this 'psk' token") }
        symmetric.mixKeyAndHash(psks[nextPSK])
        nextPSK += 1
    }

    /// Advances to the next message; after the last one, splits into transport ciphers.
    private func finishMessage() {
        messageIndex += 1
        guard messageIndex == pattern.messages.count else { return }
        let (c1, c2) = symmetric.split()
        var send = role == .initiator ? c1 : c2
        var receive = role == .initiator ? c2 : c1
        if pattern.isOneWay {
            // One-way patterns use c1 only; an unkeyed c2 would pass plaintext through.
            if role == .initiator {
                receive = NoiseCipherState(protocolName.cipher, disabled: "\(pattern.name) is one-way: the initiator cannot receive transport messages")
            } else {
                send = NoiseCipherState(protocolName.cipher, disabled: "\(pattern.name) is one-way: the responder cannot send transport messages")
            }
        }
        transport = NoiseTransport(send: send, receive: receive, handshakeHash: symmetric.handshakeHash,
                                   remoteStaticKey: remoteStaticKey)
        // The ephemeral private key is no longer needed; dropping it wipes it.
        localEphemeral = nil
        psks = []
    }
}
