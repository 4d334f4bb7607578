import PeerCrypto
@testable import PeerNet
import PeerWire
import Testing

@Suite struct SecureChannelHandshakeTests {
    @Test func bothSidesLearnEachOther() throws {
        let pair = try ChannelPair.make()
        defer { pair.initiator.close(); pair.responder.close() }
        let (i, r) = (pair.initiator, pair.responder)

        #expect(i.remoteStaticKey == pair.responderKey.publicKey)
        #expect(r.remoteStaticKey == pair.initiatorKey.publicKey)
        #expect(i.remoteDeviceID == DeviceID(publicKey: pair.responderKey.publicKey))
        #expect(r.remoteDeviceID == DeviceID(publicKey: pair.initiatorKey.publicKey))
        #expect(i.remoteHello == helloB)
        #expect(r.remoteHello == helloA)
        #expect(r.remoteHello.listenPort == 22_000 && r.remoteHello.context == "folder “Photos”")
        #expect(i.remoteHello.listenPort == nil && i.remoteHello.features == ["resources", "x-test"])
        #expect(i.handshakeHash.count == 32, "SHA-256's HASHLEN")
        #expect(i.handshakeHash == r.handshakeHash)
        #expect(i.shortAuthenticationString == r.shortAuthenticationString)
        #expect(i.shortAuthenticationString.count == 6 && i.shortAuthenticationString.allSatisfy(\.isNumber))
        #expect(i.shortAuthenticationString == ShortAuthenticationString.derive(handshakeHash: i.handshakeHash))
        #expect(i.failure == nil && r.failure == nil)
    }

    @Test func twoHandshakesGiveDifferentHashes() throws {
        let first = try ChannelPair.make(), second = try ChannelPair.make()
        #expect(first.initiator.handshakeHash != second.initiator.handshakeHash)
        for channel in [first.initiator, first.responder, second.initiator, second.responder] { channel.close() }
    }

    /// M runs its own handshake with each side and relays: A and B each talk to M's key, and
    /// the two handshake hashes (and so, but for a 10⁻⁶ chance, the codes) differ.
    @Test func manInTheMiddleShowsInTheShortAuthenticationString() throws {
        let (a, mToA) = PairStream.pair()
        let (mToB, b) = PairStream.pair()
        let keyA = KeyPair.generate(), keyB = KeyPair.generate(), keyM = KeyPair.generate()
        let mallory = Hello(displayName: "Bob", softwareVersion: "syncpeer 0.2")
        let bSide = ChannelBackground { try SecureChannel.respond(over: b, staticKey: keyB, hello: helloB) }
        let mSide = ChannelBackground { try SecureChannel.respond(over: mToA, staticKey: keyM, hello: mallory) }
        let mToBChannel = try SecureChannel.initiate(over: mToB, staticKey: keyM, hello: helloA)
        let aChannel = try SecureChannel.initiate(over: a, staticKey: keyA, hello: helloA)
        let bChannel = try bSide.value(), mToAChannel = try mSide.value()
        defer { for c in [aChannel, bChannel, mToAChannel, mToBChannel] { c.close() } }

        #expect(aChannel.remoteStaticKey == keyM.publicKey, "A actually talks to M")
        #expect(bChannel.remoteStaticKey == keyM.publicKey, "B actually talks to M")
        #expect(aChannel.handshakeHash != bChannel.handshakeHash)
        #expect(aChannel.shortAuthenticationString != bChannel.shortAuthenticationString)
        // Each leg on its own agrees, which is why only the people comparing codes catch it.
        #expect(aChannel.shortAuthenticationString == mToAChannel.shortAuthenticationString)
        #expect(bChannel.shortAuthenticationString == mToBChannel.shortAuthenticationString)
    }

    @Test func protocolVersionMismatchNamesBothVersions() throws {
        let (a, b) = PairStream.pair()
        let newer = Hello(protocolVersion: 5, displayName: "Future", softwareVersion: "syncpeer 9")
        let responder = ChannelBackground { try SecureChannel.respond(over: b, staticKey: .generate(), hello: newer) }
        let error = netError { () throws(NetError) in
            try SecureChannel.initiate(over: a, staticKey: .generate(), hello: helloA, timeout: .seconds(5))
        }
        guard case let .handshakeFailed(reason) = error else {
            Issue.record("expected handshakeFailed, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("version 5") && reason.contains("version 4"), "\(reason)")
        // The initiator hung up instead of sending message 3.
        #expect(try responder.netError(within: 10)?.isClosed == true)
    }

    @Test func thisVersionIs4() {
        #expect(SecureChannel.protocolVersion == 4 && Hello.currentProtocolVersion == 4)
        #expect(SecureChannel.prologue == Array("syncpeer/4".utf8))
        #expect(SecureChannel.versionPayload == [0, 4])
        #expect(Hello(displayName: "x", softwareVersion: "").protocolVersion == 4)
    }

    // MARK: Peers of older protocol versions, played here step by step as their code ran.

    /// An older protocol version as its own code spoke it.
    struct OlderPeer: Sendable, CustomTestStringConvertible {
        var version: UInt16
        var protocolName: String
        /// What its initiator sent as message 1's payload.
        var message1: [UInt8]
        var prologue: [UInt8] { Array("syncpeer/\(version)".utf8) }
        var testDescription: String { "protocol version \(version)" }

        /// That version's check of the responder's hello (message 2), as its code has it.
        func verdict(on hello: Hello) -> String? {
            hello.protocolVersion == version ? nil : "the peer speaks protocol version \(hello.protocolVersion), this device speaks version \(version)"
        }
    }

    /// Version 1: Noise_XX_25519_ChaChaPoly_BLAKE2b, prologue "syncpeer/1", empty message 1.
    /// Version 2: Noise_XX_25519_AESGCM_SHA256, prologue "syncpeer/2", message 1 carrying 2
    /// (BLAKE2b-256 content hashes). Version 3: the same suite, prologue "syncpeer/3",
    /// message 1 carrying 3 (SHA-256 content hashes, where version 4 has BLAKE3).
    static let olderPeers = [
        OlderPeer(version: 1, protocolName: "Noise_XX_25519_ChaChaPoly_BLAKE2b", message1: []),
        OlderPeer(version: 2, protocolName: "Noise_XX_25519_AESGCM_SHA256", message1: [0, 2]),
        OlderPeer(version: 3, protocolName: "Noise_XX_25519_AESGCM_SHA256", message1: [0, 3]),
    ]

    /// An older initiator gets a message 2 it can decrypt, whose hello names version 4, so it
    /// refuses by version (not "did not authenticate", nor a hang-up); our responder refuses
    /// it by name, at once, not when its timer fires.
    @Test(arguments: olderPeers)
    func olderInitiatorIsToldTheVersionInItsOwnProtocol(_ older: OlderPeer) throws {
        let (a, b) = PairStream.pair()
        let side = ChannelBackground {
            try SecureChannel.respond(over: a, staticKey: .generate(), hello: helloB, timeout: .seconds(60))
        }
        let old = NoiseHandshake.xx(role: .initiator, prologue: older.prologue, staticKey: .generate(),
                                    protocolName: older.protocolName)
        try b.write(NoiseFraming.frame(old.writeMessage(payload: older.message1)))
        var reader = NoiseMessageReader()
        var message2: [UInt8]?
        while message2 == nil {
            let bytes = try b.read(maxCount: 4096, deadline: .now + .seconds(30))
            try #require(!bytes.isEmpty, "the responder hung up without answering the version-\(older.version) peer")
            reader.append(bytes)
            message2 = try reader.next()
        }
        let hello = try Hello.decode(try old.readMessage(message2!))
        #expect(hello.protocolVersion == 4)
        #expect(hello.displayName == helloB.displayName)
        #expect(older.verdict(on: hello) == "the peer speaks protocol version 4, this device speaks version \(older.version)")

        let error = try side.netError(within: 30)
        guard case let .handshakeFailed(reason) = error else {
            Issue.record("expected handshakeFailed, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("incompatible protocol version: the peer speaks protocol version \(older.version) ")
                    && reason.contains(older.protocolName) && reason.contains("this device speaks version 4"),
                "\(reason)")
        #expect(try b.read(maxCount: 100, deadline: .now + .seconds(30)) == [], "the responder closed the connection")
        b.close()
    }

    /// An older responder refuses message 1 (version 1 requires it empty, versions 2 and 3 to
    /// name their own) and hangs up; our initiator says the peer may be of an older, incompatible version,
    /// at once.
    @Test(arguments: olderPeers)
    func olderResponderHangingUpIsReportedAsIncompatible(_ older: OlderPeer) throws {
        let (a, b) = PairStream.pair()
        let side = ChannelBackground {
            try SecureChannel.initiate(over: a, staticKey: .generate(), hello: helloA, timeout: .seconds(60))
        }
        let old = NoiseHandshake.xx(role: .responder, prologue: older.prologue, staticKey: .generate(),
                                    protocolName: older.protocolName)
        var reader = NoiseMessageReader()
        var message1: [UInt8]?
        while message1 == nil {
            let bytes = try b.read(maxCount: 4096, deadline: .now + .seconds(30))
            try #require(!bytes.isEmpty)
            reader.append(bytes)
            message1 = try reader.next()
        }
        let payload1 = try old.readMessage(message1!)
        #expect(payload1 == [0, 4], "message 1 carries version 4, which version \(older.version) refuses")
        #expect(payload1 != older.message1)
        b.close()  // what the older version does with a message 1 not its own
        let error = try side.netError(within: 30)
        guard case let .closed(reason) = error else {
            Issue.record("expected closed, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("incompatible protocol version") && reason.contains("older protocol version, 1, 2 or 3,")
                    && reason.contains("naming this device's version 4"), "\(reason)")
    }

    @Test func invalidLocalHelloFailsBeforeSendingAnything() throws {
        let (a, b) = PairStream.pair()
        let bad = Hello(displayName: "", softwareVersion: "x")
        let error = netError { () throws(NetError) in try SecureChannel.initiate(over: a, staticKey: .generate(), hello: bad) }
        #expect(error?.isHandshakeFailed == true)
        #expect(try b.read(maxCount: 100, deadline: .now + .seconds(5)) == [], "nothing sent; stream closed")
    }

    // MARK: Peers that misbehave

    @Test func silentPeerTimesOut() throws {
        for role in [NoiseRole.initiator, .responder] {
            let (a, b) = PairStream.pair()
            let side = ChannelBackground {
                role == .initiator
                    ? try SecureChannel.initiate(over: a, staticKey: .generate(), hello: helloA, timeout: .milliseconds(300))
                    : try SecureChannel.respond(over: a, staticKey: .generate(), hello: helloA, timeout: .milliseconds(300))
            }
            let error = try side.netError(within: 20)
            #expect(error?.isTimedOut == true, "\(role): \(String(describing: error))")
            b.close()
        }
    }

    @Test func slowPeerTimesOutAcrossTheWholeHandshake() async throws {
        // The peer trickles message 1 one byte every 50 ms: each read succeeds, but the
        // handshake as a whole takes longer than 300 ms.
        let (a, b) = PairStream.pair()
        let side = ChannelBackground {
            try SecureChannel.respond(over: a, staticKey: .generate(), hello: helloB, timeout: .milliseconds(300))
        }
        let message1 = try NoiseFraming.frame(NoiseHandshake.xx(role: .initiator, prologue: SecureChannel.prologue,
                                                                staticKey: .generate()).writeMessage())
        for byte in message1 {
            if (try? b.write([byte])) == nil { break }
            try await Task.sleep(for: .milliseconds(50))
            if side.isFinished { break }
        }
        #expect(try side.netError(within: 20)?.isTimedOut == true)
        b.close()
    }

    @Test func truncatedMessage1FailsQuickly() throws {
        let (a, b) = PairStream.pair()
        let side = ChannelBackground { try SecureChannel.respond(over: a, staticKey: .generate(), hello: helloB) }
        let message1 = try NoiseFraming.frame(NoiseHandshake.xx(role: .initiator, prologue: SecureChannel.prologue,
                                                                staticKey: .generate()).writeMessage())
        try b.write(Array(message1.prefix(message1.count / 2)))
        b.close()
        let error = try side.netError(within: 5)  // the default timeout is 10 s: this must be EOF, not the timer
        #expect(error?.isHandshakeFailed == true || error?.isClosed == true, "\(String(describing: error))")
        if case let .handshakeFailed(reason) = error { #expect(reason.contains("truncated"), "\(reason)") }
    }

    @Test func peerThatHangsUpBeforeMessage1IsClosed() throws {
        let (a, b) = PairStream.pair()
        b.close()
        let error = netError { () throws(NetError) in try SecureChannel.respond(over: a, staticKey: .generate(), hello: helloB) }
        #expect(error?.isClosed == true)
    }

    struct Garbage: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var testDescription: String { name }
    }

    @Test(arguments: [
        Garbage(name: "random 100-byte message", bytes: [0, 100] + patternBytes(100, seed: 1)),
        Garbage(name: "empty message", bytes: [0, 0]),
        Garbage(name: "too short for an ephemeral key", bytes: [0, 10] + patternBytes(10, seed: 2)),
        Garbage(name: "announces 65,535 bytes", bytes: [0xFF, 0xFF] + patternBytes(50, seed: 3)),
        Garbage(name: "HTTP", bytes: Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8)),
    ])
    func garbageInsteadOfMessage2(garbage: Garbage) throws {
        let (a, b) = PairStream.pair()
        let side = ChannelBackground {
            try SecureChannel.initiate(over: a, staticKey: .generate(), hello: helloA, timeout: .seconds(5))
        }
        _ = try b.read(maxCount: 36, deadline: .now + .seconds(5))  // message 1
        try b.write(garbage.bytes)
        b.shutdownWrite()
        let error = try side.netError(within: 20)
        #expect(error?.isHandshakeFailed == true, "\(String(describing: error))")
        b.close()
    }

    /// A version field that is not ours nor an older version's initiator's (version 1 sent
    /// an empty one, never [0, 1]) gets no answer.
    @Test(arguments: [[1, 2, 3], [0, 5], [0], [0, 1]] as [[UInt8]])
    func message1OfAnotherVersionIsRefused(payload: [UInt8]) throws {
        let (a, b) = PairStream.pair()
        let side = ChannelBackground { try SecureChannel.respond(over: a, staticKey: .generate(), hello: helloB) }
        let state = NoiseHandshake.xx(role: .initiator, prologue: SecureChannel.prologue, staticKey: .generate())
        try b.write(NoiseFraming.frame(state.writeMessage(payload: payload)))
        let error = try side.netError(within: 20)
        guard case let .handshakeFailed(reason) = error else {
            Issue.record("expected handshakeFailed, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("incompatible protocol version") && reason.contains("this device speaks version 4"), "\(reason)")
        if payload == [0, 5] { #expect(reason.contains("the peer speaks protocol version 5"), "\(reason)") }
        if payload == [0, 1] { #expect(reason.contains("the peer speaks protocol version 1"), "\(reason)") }
        #expect(try b.read(maxCount: 100, deadline: .now + .seconds(20)) == [], "nothing answered; stream closed")
        b.close()
    }

    @Test func wrongPrologueFails() throws {
        let (a, b) = PairStream.pair()
        let side = ChannelBackground { try SecureChannel.respond(over: a, staticKey: .generate(), hello: helloB) }
        let state = NoiseHandshake.xx(role: .initiator, prologue: Array("syncpeer/9".utf8), staticKey: .generate())
        try b.write(NoiseFraming.frame(state.writeMessage(payload: SecureChannel.versionPayload)))
        var reader = NoiseMessageReader()
        while true {
            let bytes = try b.read(maxCount: 4096, deadline: .now + .seconds(5))
            #expect(!bytes.isEmpty)
            if bytes.isEmpty { break }
            reader.append(bytes)
            if let message2 = try reader.next() {
                #expect(throws: CryptoError.self) { try state.readMessage(message2) }
                break
            }
        }
        b.close()
        #expect(try side.netError(within: 20)?.isClosed == true)
    }

    /// A peer that completes a real Noise handshake but sends a payload that is not a hello.
    @Test(arguments: [
        ([] as [UInt8], "empty payload"),
        (Array("SPH2".utf8) + [0, 1], "another magic"),
        (Hello(displayName: "x", softwareVersion: "y").encode() + [0], "a trailing byte"),
    ])
    func undecodablePeerHello(payload: [UInt8], label: String) throws {
        let (a, b) = PairStream.pair()
        let side = ChannelBackground {
            try SecureChannel.initiate(over: a, staticKey: .generate(), hello: helloA, timeout: .seconds(5))
        }
        let state = NoiseHandshake.xx(role: .responder, prologue: SecureChannel.prologue, staticKey: .generate())
        var reader = NoiseMessageReader()
        var message1: [UInt8]?
        while message1 == nil {
            let bytes = try b.read(maxCount: 4096, deadline: .now + .seconds(5))
            try #require(!bytes.isEmpty)
            reader.append(bytes)
            message1 = try reader.next()
        }
        _ = try state.readMessage(message1!)
        try b.write(NoiseFraming.frame(state.writeMessage(payload: payload)))
        let error = try side.netError(within: 20)
        guard case let .handshakeFailed(reason) = error else {
            Issue.record("\(label): expected handshakeFailed, got \(String(describing: error))")
            return
        }
        #expect(reason.hasPrefix("peer hello: "), "\(label): \(reason)")
        b.close()
    }

    // MARK: Tampering during the handshake

    struct HandshakeFlip: Sendable, CustomTestStringConvertible {
        var name: String
        var flips: Relay.Flips
        /// The side that must report handshakeFailed.
        var detector: NoiseRole
        var testDescription: String { name }
    }

    // Layout: initiator → responder: message 1 (2 + 32 + 2-byte version), then message 3
    // (2 + 48 encrypted static key + hello + 16). Responder → initiator: message 2
    // (2 + 32 + 48 + hello + 16). Length prefixes are left alone (a longer announced
    // length would just wait for the timeout).
    static let handshakeFlips: [HandshakeFlip] = {
        let message3 = 36
        let helloALength = helloA.encode().count, helloBLength = helloB.encode().count
        return [
            HandshakeFlip(name: "message 1, first byte of e", flips: .init(initiatorToResponder: [2: 0x01]), detector: .initiator),
            HandshakeFlip(name: "message 1, last byte of e", flips: .init(initiatorToResponder: [33: 0x80]), detector: .initiator),
            HandshakeFlip(name: "message 1, version", flips: .init(initiatorToResponder: [35: 0x01]), detector: .responder),
            HandshakeFlip(name: "message 2, e", flips: .init(responderToInitiator: [10: 0x04]), detector: .initiator),
            HandshakeFlip(name: "message 2, encrypted s", flips: .init(responderToInitiator: [40: 0x01]), detector: .initiator),
            HandshakeFlip(name: "message 2, hello", flips: .init(responderToInitiator: [2 + 32 + 48 + 3: 0x01]), detector: .initiator),
            HandshakeFlip(name: "message 2, last tag byte", flips: .init(responderToInitiator: [2 + 32 + 48 + helloBLength + 15: 0x01]),
                          detector: .initiator),
            HandshakeFlip(name: "message 3, encrypted s", flips: .init(initiatorToResponder: [message3 + 2: 0x01]), detector: .responder),
            HandshakeFlip(name: "message 3, hello", flips: .init(initiatorToResponder: [message3 + 2 + 48 + 5: 0x20]), detector: .responder),
            HandshakeFlip(name: "message 3, last tag byte", flips: .init(initiatorToResponder: [message3 + 2 + 48 + helloALength + 15: 0x01]),
                          detector: .responder),
        ]
    }()

    @Test(arguments: handshakeFlips)
    func flippedHandshakeByteFails(flip: HandshakeFlip) throws {
        let (initiatorStream, responderStream, _, ends) = Relay.connect(flips: flip.flips)
        let keyA = KeyPair.generate(), keyB = KeyPair.generate()
        let responder = ChannelBackground {
            try SecureChannel.respond(over: responderStream, staticKey: keyB, hello: helloB, timeout: .seconds(10))
        }
        let initiator = ChannelBackground {
            try SecureChannel.initiate(over: initiatorStream, staticKey: keyA, hello: helloA, timeout: .seconds(10))
        }
        let initiatorError = try initiator.netError(within: 30)
        if initiatorError == nil {
            // Message 3 was tampered with: the initiator cannot know until the responder hangs up.
            try initiator.value().close()
        }
        let responderError = try responder.netError(within: 30)
        if responderError == nil { try responder.value().close() }
        let (detected, other) = flip.detector == .initiator ? (initiatorError, responderError) : (responderError, initiatorError)
        #expect(detected?.isHandshakeFailed == true, "\(flip.name): \(String(describing: detected))")
        #expect(other == nil || other?.isClosed == true || other?.isHandshakeFailed == true,
                "\(flip.name): \(String(describing: other))")
        #expect(initiatorError != nil || responderError != nil)
        for end in ends { end.close() }
    }
}
