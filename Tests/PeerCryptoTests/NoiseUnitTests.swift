import PeerCrypto
import Testing

/// The message of a `CryptoError.handshake`, or nil for any other error.
private func handshakeMessage(_ error: CryptoError?) -> String? {
    if case let .handshake(message)? = error { return message }
    return nil
}

private func unhex(_ text: String) -> [UInt8] { bytes(fromHex: text)! }

struct HMACAndHKDFTests {
    /// Expected values computed independently with Python's `hmac` and `hashlib.blake2b`.
    static let hmacCases: [(key: [UInt8], message: String, mac: String)] = [
        ([UInt8](repeating: 0x0b, count: 20), "Hi There",
         "358a6a184924894fc34bee5680eedf57d84a37bb38832f288e3b27dc63a98cc8c91e76da476b508bc6b2d408a248857452906e4a20b48c6b4b55d2df0fe1dd24"),
        (Array("Jefe".utf8), "what do ya want for nothing?",
         "6ff884f8ddc2a6586b3c98a4cd6ebdf14ec10204b6710073eb5865ade37a2643b8807c1335d107ecdb9ffeaeb6828c4625ba172c66379efcd222c2de11727ab4"),
        // Longer than the 128-byte block: the key is hashed first.
        ([UInt8](repeating: 0xaa, count: 131), "Test Using Larger Than Block-Size Key - Hash Key First",
         "a54b2943b2a20227d41ca46c0945af09bc1faefb2f49894c23aebc557fb79c4889dca74408dc865086667aedee4a3185c53a49c80b814c4c5813ea0c8b38a8f8"),
        ([], "",
         "198cd2006f66ff83fbbd913f78aca2251caf4f19fe9475aade8cf2091b99a68466775177424f58286886cbae8229644cec747237d4b721735485e17372fdf59c"),
        // Exactly one block: used as is, not hashed.
        (Array(0..<128), "exactly one block of key",
         "627a036ea054239fb9949ca91a664f83ba687e2d032bd2832e86b99b52455ca89f4d1a69eedef488c45d3505095d4654b5086d6266df42e491c4b4a76590c371"),
    ]

    @Test(arguments: 0..<hmacCases.count)
    func hmacBLAKE2b(_ index: Int) {
        let c = Self.hmacCases[index]
        let mac = HMACBLAKE2b.authenticationCode(key: c.key, message: Array(c.message.utf8))
        #expect(hex(mac.unsafeCopy()) == c.mac)
    }

    @Test func hmacOverPartsEqualsConcatenation() {
        let key = Array("k".utf8)
        let whole = HMACBLAKE2b.authenticationCode(key: key, message: Array("hello world".utf8))
        let parts = HMACBLAKE2b.authenticationCode(key: key, message: [Array("hello ".utf8), Array("world".utf8)])
        #expect(whole == parts)
    }

    @Test func hkdfMatchesNoiseDefinition() {
        let outputs = HMACBLAKE2b.hkdf(chainingKey: Array(0..<64), inputKeyMaterial: Array("input key material".utf8), outputs: 3)
        #expect(outputs.map { hex($0.unsafeCopy()) } == [
            "a94ec1ceaa5ac0280eafc97980003e4019176e4bf7c914c45fb0bbda0b22a9954d01f3697bbf32817ed0fccbf6dd1ebd24c0b05611051e63dc56e131af4f7c10",
            "f9d83f6c5d34695529eb8e35c8a2ed78658092e7c3b38fdf0cea2a2096b6f6e542af644e298508f37da08860db285a8ad4b604c1f160f23356df6b28c183508d",
            "bb6f14b645bac5dd79c98ce583e3357b43b431c22400c9b79d690c1d2fe2d391ab8372b0b08553b56e802dc6badace75398c1b8a973d0aab18d857d431c3a48f",
        ])
        let two = HMACBLAKE2b.hkdf(chainingKey: Array(0..<64), inputKeyMaterial: Array("input key material".utf8), outputs: 2)
        #expect(two == Array(outputs.prefix(2)))
    }
}

struct SHA256AndAESGCMTests {
    @Test func sha256KnownAnswers() {
        #expect(hex(SHA256.hash([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // FIPS 180-4's two-block message, streamed in uneven parts.
        var hasher = SHA256.Hasher()
        let text = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        hasher.update(text[0..<5])
        hasher.update(text[5...])
        #expect(hex(hasher.finalize()) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    /// RFC 4231 test cases 1 and 6 (a key longer than the 64-byte block is hashed first).
    @Test func hmacSHA256KnownAnswers() {
        let one = NoiseHMAC.authenticationCode(.sha256, key: [UInt8](repeating: 0x0b, count: 20), message: [Array("Hi There".utf8)])
        #expect(hex(one.unsafeCopy()) == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        let six = NoiseHMAC.authenticationCode(.sha256, key: [UInt8](repeating: 0xaa, count: 131),
                                               message: [Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)])
        #expect(hex(six.unsafeCopy()) == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    /// The transport path (in place, no allocation) and the allocating path agree, a forged
    /// message is refused without advancing the nonce, and nothing unauthenticated is left
    /// in the output buffer.
    @Test func aesGCMTransportInPlace() throws {
        let key = SecureBytes(Array(0..<32))
        let sender = try NoiseCipherState(.aesGCM, key: key), receiver = try NoiseCipherState(.aesGCM, key: key)
        let plaintext = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var buffer = plaintext + [UInt8](repeating: 0, count: 16)
        try buffer.withUnsafeMutableBytes { b in
            try sender.encrypt(UnsafeRawBufferPointer(rebasing: b[0..<plaintext.count]), into: b.baseAddress!)
        }
        #expect(buffer == AESGCM.seal(key: key, nonce: 0, ad: [UInt8](), plaintext: plaintext))
        var forged = buffer
        forged[500] ^= 1
        let error = #expect(throws: CryptoError.self) {
            _ = try forged.withUnsafeMutableBytes { b in try receiver.decrypt(UnsafeRawBufferPointer(b), into: b.baseAddress!) }
        }
        #expect(error == .authenticationFailed)
        #expect(forged.prefix(plaintext.count).allSatisfy { $0 == 0 }, "no unauthenticated plaintext left behind")
        #expect(receiver.nonce == 0)
        let count = try buffer.withUnsafeMutableBytes { b in try receiver.decrypt(UnsafeRawBufferPointer(b), into: b.baseAddress!) }
        #expect(count == plaintext.count && Array(buffer.prefix(count)) == plaintext)
        #expect(try AESGCM.open(key: key, nonce: 0, ad: [UInt8](), ciphertext: AESGCM.seal(key: key, nonce: 0, ad: [UInt8](), plaintext: plaintext)) == plaintext)
        try sender.rekey(); try receiver.rekey()
        #expect(try receiver.decrypt(try sender.encrypt(plaintext)) == plaintext)
    }

    /// A message sealed from two places (a header, then data where it lies) is the message
    /// sealed from the two joined, whatever the split, also splits inside a 16-byte block.
    @Test(arguments: [(0, 0), (0, 1000), (37, 0), (37, 963), (16, 984), (1, 65_518)])
    func aesGCMSealsTwoPartsAsOne(first: Int, second: Int) throws {
        let key = SecureBytes(Array(0..<32))
        let sender = try NoiseCipherState(.aesGCM, key: key)
        let plaintext = (0..<(first + second)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        var output = [UInt8](repeating: 0, count: plaintext.count + 16)
        try plaintext.withUnsafeBytes { p in
            try output.withUnsafeMutableBytes { o in
                try sender.encrypt(UnsafeRawBufferPointer(rebasing: p[0..<first]), UnsafeRawBufferPointer(rebasing: p[first...]),
                                   into: o.baseAddress!)
            }
        }
        #expect(output == AESGCM.seal(key: key, nonce: 0, ad: [UInt8](), plaintext: plaintext))
        #expect(sender.nonce == 1)
    }
}

struct NoiseCipherStateTests {
    static let key = SecureBytes(Array(0..<32))

    @Test func rekeyReplacesKeyAndKeepsNonce() throws {
        let sender = try NoiseCipherState(key: Self.key)
        let receiver = try NoiseCipherState(key: Self.key)
        #expect(try receiver.decrypt(try sender.encrypt(Array("a".utf8))) == Array("a".utf8))
        try sender.rekey()
        try receiver.rekey()
        #expect(sender.nonce == 1)
        // Expected: ChaCha20-Poly1305 under the first 32 bytes of
        // ENCRYPT(k, 2^64-1, "", zeros(32)), nonce 1 (computed with Python `cryptography`).
        let ciphertext = try sender.encrypt(Array("hello".utf8))
        #expect(hex(ciphertext) == "501050ed1b362853df1fbbf0bfabdabd9194db7e8a")
        #expect(try receiver.decrypt(ciphertext) == Array("hello".utf8))

        // A peer that did not rekey cannot read the message.
        let stale = try NoiseCipherState(key: Self.key)
        stale.setNonce(1)
        #expect(throws: CryptoError.authenticationFailed) { try stale.decrypt(ciphertext) }
    }

    @Test func tamperedCiphertextFailsWithoutAdvancingNonce() throws {
        let sender = try NoiseCipherState(key: Self.key)
        let receiver = try NoiseCipherState(key: Self.key)
        let ciphertext = try sender.encryptWithAd(Array("ad".utf8), plaintext: Array("payload".utf8))
        for index in [0, ciphertext.count - 1] {
            var tampered = ciphertext
            tampered[index] ^= 0x80
            #expect(throws: CryptoError.authenticationFailed) { try receiver.decryptWithAd(Array("ad".utf8), ciphertext: tampered) }
            #expect(receiver.nonce == 0)
        }
        #expect(throws: CryptoError.authenticationFailed) { try receiver.decryptWithAd(Array("other".utf8), ciphertext: ciphertext) }
        #expect(throws: CryptoError.authenticationFailed) { try receiver.decryptWithAd(Array("ad".utf8), ciphertext: Array(ciphertext.prefix(15))) }
        #expect(receiver.nonce == 0)
        // The genuine message still decrypts at the unchanged nonce.
        #expect(try receiver.decryptWithAd(Array("ad".utf8), ciphertext: ciphertext) == Array("payload".utf8))
        #expect(receiver.nonce == 1)
    }

    @Test func reservedNonceIsNeverUsed() throws {
        let cipher = try NoiseCipherState(key: Self.key)
        cipher.setNonce(UInt64.max - 1)
        _ = try cipher.encrypt([1, 2, 3])
        #expect(cipher.nonce == UInt64.max)
        #expect(throws: CryptoError.nonceExhausted) { try cipher.encrypt([1]) }
        #expect(throws: CryptoError.nonceExhausted) { try cipher.decrypt([UInt8](repeating: 0, count: 17)) }
        // Rekey itself uses 2^64-1 and stays available.
        try cipher.rekey()
    }

    @Test func emptyCipherPassesPlaintextThrough() throws {
        let cipher = NoiseCipherState()
        #expect(!cipher.hasKey)
        #expect(try cipher.encryptWithAd([9], plaintext: [1, 2, 3]) == [1, 2, 3])
        #expect(cipher.nonce == 0)
        #expect(throws: CryptoError.self) { try cipher.rekey() }
    }

    @Test func transportMessagesAreLimitedTo65535Bytes() throws {
        let sender = try NoiseCipherState(key: Self.key)
        let receiver = try NoiseCipherState(key: Self.key)
        let largest = [UInt8](repeating: 7, count: Noise.maxMessageLength - Noise.tagLength)
        let ciphertext = try sender.encrypt(largest)
        #expect(ciphertext.count == Noise.maxMessageLength)
        #expect(try receiver.decrypt(ciphertext) == largest)
        #expect(throws: CryptoError.self) { try sender.encrypt(largest + [0]) }
        #expect(throws: CryptoError.self) { try receiver.decrypt(ciphertext + [0]) }
    }
}

struct NoiseHandshakeTests {
    /// Runs a complete handshake, returning the payloads each side read.
    @discardableResult
    static func complete(_ initiator: NoiseHandshakeState, _ responder: NoiseHandshakeState) throws -> [[UInt8]] {
        var payloads: [[UInt8]] = []
        var i = 0
        while !initiator.isComplete || !responder.isComplete {
            let (writer, reader) = i % 2 == 0 ? (initiator, responder) : (responder, initiator)
            payloads.append(try reader.readMessage(try writer.writeMessage(payload: Array("message \(i)".utf8))))
            i += 1
        }
        return payloads
    }

    @Test func xxBetweenSwiftPeersLearnsStaticKeys() throws {
        let alice = KeyPair.generate(), bob = KeyPair.generate()
        let prologue = Array("syncpeer/1".utf8)
        let initiator = NoiseHandshake.xx(role: .initiator, prologue: prologue, staticKey: alice)
        let responder = NoiseHandshake.xx(role: .responder, prologue: prologue, staticKey: bob)
        #expect(initiator.isMyTurnToWrite && !responder.isMyTurnToWrite)
        let payloads = try Self.complete(initiator, responder)
        #expect(payloads == (0..<3).map { Array("message \($0)".utf8) })

        let a = try #require(initiator.transport), b = try #require(responder.transport)
        #expect(a.remoteStaticKey == bob.publicKey)
        #expect(b.remoteStaticKey == alice.publicKey)
        #expect(a.handshakeHash == b.handshakeHash)
        #expect(a.handshakeHash.count == 32, "SHA-256's HASHLEN (protocol version 2's suite)")
        #expect(try b.receive.decrypt(try a.send.encrypt(Array("to bob".utf8))) == Array("to bob".utf8))
        #expect(try a.receive.decrypt(try b.send.encrypt(Array("to alice".utf8))) == Array("to alice".utf8))

        let error = #expect(throws: CryptoError.self) { try initiator.writeMessage() }
        #expect(handshakeMessage(error)?.contains("complete") == true)
    }

    @Test func outOfTurnCallsAreRejectedWithoutBreakingTheHandshake() throws {
        let initiator = NoiseHandshake.xx(role: .initiator, staticKey: .generate())
        let responder = NoiseHandshake.xx(role: .responder, staticKey: .generate())
        let write = #expect(throws: CryptoError.self) { try responder.writeMessage() }
        #expect(handshakeMessage(write)?.contains("out-of-turn write") == true)
        let read = #expect(throws: CryptoError.self) { try initiator.readMessage([UInt8](repeating: 0, count: 32)) }
        #expect(handshakeMessage(read)?.contains("out-of-turn read") == true)
        // Turn errors are caller bugs, not protocol failures: the handshake goes on.
        try Self.complete(initiator, responder)
        #expect(initiator.transport?.handshakeHash == responder.transport?.handshakeHash)
    }

    @Test func truncatedMessagesFailAndAbandonTheHandshake() throws {
        let initiator = NoiseHandshake.xx(role: .initiator, staticKey: .generate())
        let responder = NoiseHandshake.xx(role: .responder, staticKey: .generate())
        let m1 = try initiator.writeMessage()
        let short = #expect(throws: CryptoError.self) { try responder.readMessage(Array(m1.prefix(10))) }
        #expect(handshakeMessage(short)?.contains("too short") == true)
        // After a failure the handshake refuses to continue, even with the real message.
        let after = #expect(throws: CryptoError.self) { try responder.readMessage(m1) }
        #expect(handshakeMessage(after)?.contains("earlier handshake step failed") == true)

        // Message 2 (e, ee, s, es + payload = 32 + 48 + 16 bytes) cut inside the static key.
        let initiator2 = NoiseHandshake.xx(role: .initiator, staticKey: .generate())
        let responder2 = NoiseHandshake.xx(role: .responder, staticKey: .generate())
        _ = try responder2.readMessage(try initiator2.writeMessage())
        let m2 = try responder2.writeMessage()
        #expect(m2.count == 96)
        let cut = #expect(throws: CryptoError.self) { try initiator2.readMessage(Array(m2.prefix(60))) }
        #expect(handshakeMessage(cut)?.contains("static key") == true)
        // Cut inside the payload tag.
        let initiator3 = NoiseHandshake.xx(role: .initiator, staticKey: .generate())
        let responder3 = NoiseHandshake.xx(role: .responder, staticKey: .generate())
        _ = try responder3.readMessage(try initiator3.writeMessage())
        let m2b = try responder3.writeMessage()
        let tag = #expect(throws: CryptoError.self) { try initiator3.readMessage(Array(m2b.prefix(90))) }
        #expect(handshakeMessage(tag)?.contains("tag") == true)
    }

    @Test func tamperedHandshakeMessageFailsAuthentication() throws {
        let initiator = NoiseHandshake.xx(role: .initiator, staticKey: .generate())
        let responder = NoiseHandshake.xx(role: .responder, staticKey: .generate())
        _ = try responder.readMessage(try initiator.writeMessage())
        var m2 = try responder.writeMessage()
        m2[40] ^= 1
        #expect(throws: CryptoError.authenticationFailed) { try initiator.readMessage(m2) }
    }

    @Test func pskMismatchFails() throws {
        let name = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2b"
        let initiator = try NoiseHandshakeState(protocolName: name, role: .initiator, preSharedKeys: [.random(count: 32)])
        let responder = try NoiseHandshakeState(protocolName: name, role: .responder, preSharedKeys: [.random(count: 32)])
        // psk0 keys the very first payload, so the responder detects the mismatch at once.
        #expect(throws: CryptoError.authenticationFailed) { try responder.readMessage(try initiator.writeMessage(payload: [1])) }

        let psk = SecureBytes.random(count: 32)
        let i2 = try NoiseHandshakeState(protocolName: name, role: .initiator, preSharedKeys: [psk])
        let r2 = try NoiseHandshakeState(protocolName: name, role: .responder, preSharedKeys: [psk])
        try Self.complete(i2, r2)
        #expect(i2.handshakeHash == r2.handshakeHash)
    }

    @Test func prologueMismatchFails() throws {
        let initiator = NoiseHandshake.xx(role: .initiator, prologue: [1], staticKey: .generate())
        let responder = NoiseHandshake.xx(role: .responder, prologue: [2], staticKey: .generate())
        _ = try responder.readMessage(try initiator.writeMessage())
        #expect(throws: CryptoError.authenticationFailed) { try initiator.readMessage(try responder.writeMessage()) }
    }

    @Test func missingOrWrongKeysAreReportedUpFront() throws {
        let ik = "Noise_IK_25519_ChaChaPoly_BLAKE2b"
        let noRemote = #expect(throws: CryptoError.self) {
            try NoiseHandshakeState(protocolName: ik, role: .initiator, staticKeyPair: .generate())
        }
        #expect(handshakeMessage(noRemote)?.contains("rs") == true)
        let noStatic = #expect(throws: CryptoError.self) {
            try NoiseHandshakeState(protocolName: NoiseHandshake.xxProtocolName, role: .responder)
        }
        #expect(handshakeMessage(noStatic)?.contains("static key pair") == true)
        let unusedRemote = #expect(throws: CryptoError.self) {
            try NoiseHandshakeState(protocolName: NoiseHandshake.xxProtocolName, role: .initiator,
                                    staticKeyPair: .generate(), remoteStaticKey: KeyPair.generate().publicKey)
        }
        #expect(handshakeMessage(unusedRemote) != nil)
        let pskCount = #expect(throws: CryptoError.self) {
            try NoiseHandshakeState(protocolName: "Noise_NNpsk0+psk2_25519_ChaChaPoly_BLAKE2b", role: .initiator,
                                    preSharedKeys: [.random(count: 32)])
        }
        #expect(handshakeMessage(pskCount)?.contains("2 pre-shared") == true)
        #expect(throws: CryptoError.invalidLength(what: "Noise pre-shared key", expected: 32, actual: 16)) {
            try NoiseHandshakeState(protocolName: "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2b", role: .initiator,
                                    preSharedKeys: [.random(count: 16)])
        }
    }

    @Test func oversizedHandshakeMessageIsRefused() throws {
        let initiator = try NoiseHandshakeState(protocolName: "Noise_NN_25519_ChaChaPoly_BLAKE2b", role: .initiator)
        let responder = try NoiseHandshakeState(protocolName: "Noise_NN_25519_ChaChaPoly_BLAKE2b", role: .responder)
        let tooLong = #expect(throws: CryptoError.self) {
            try initiator.writeMessage(payload: [UInt8](repeating: 0, count: Noise.maxMessageLength - 31))
        }
        #expect(handshakeMessage(tooLong)?.contains("65535") == true)
        let tooLongRead = #expect(throws: CryptoError.self) {
            try responder.readMessage([UInt8](repeating: 0, count: Noise.maxMessageLength + 1))
        }
        #expect(handshakeMessage(tooLongRead)?.contains("65535") == true)
    }

    @Test func oneWayPatternOnlySendsFromInitiator() throws {
        let responderKey = KeyPair.generate()
        let initiator = try NoiseHandshakeState(protocolName: "Noise_N_25519_ChaChaPoly_BLAKE2b", role: .initiator,
                                                remoteStaticKey: responderKey.publicKey)
        let responder = try NoiseHandshakeState(protocolName: "Noise_N_25519_ChaChaPoly_BLAKE2b", role: .responder,
                                                staticKeyPair: responderKey)
        try Self.complete(initiator, responder)
        let a = try #require(initiator.transport), b = try #require(responder.transport)
        #expect(try b.receive.decrypt(try a.send.encrypt([1, 2])) == [1, 2])
        #expect(throws: CryptoError.self) { try b.send.encrypt([3]) }
        #expect(throws: CryptoError.self) { try a.receive.decrypt([UInt8](repeating: 0, count: 16)) }
    }
}

struct NoisePatternTests {
    @Test(arguments: [
        "Noise_XX_448_ChaChaPoly_BLAKE2b", "Noise_XX_25519_AESGCM_SHA512", "Noise_XX_25519_ChaChaPoly_BLAKE2s",
        "Noise_ZZ_25519_ChaChaPoly_BLAKE2b", "Noise_XXfallback_25519_ChaChaPoly_BLAKE2b", "Noise_NNpsk3_25519_ChaChaPoly_BLAKE2b",
        "Noise_NNpsk0+psk0_25519_ChaChaPoly_BLAKE2b", "Noise_NNpsk_25519_ChaChaPoly_BLAKE2b", "Noise_XX_25519_ChaChaPoly",
        "NoiseXX_25519_ChaChaPoly_BLAKE2b",
    ])
    func unsupportedNamesAreRejected(_ name: String) {
        let error = #expect(throws: CryptoError.self) { try NoiseProtocolName(name) }
        if case .unsupported? = error {} else { Issue.record("expected .unsupported, got \(String(describing: error))") }
    }

    @Test func pskModifiersPlaceTokens() throws {
        let p = try NoiseHandshakePattern(named: "NNpsk0+psk2")
        #expect(p.messages == [[.psk, .e], [.e, .ee, .psk]])
        #expect(p.pskCount == 2 && p.isPSKHandshake)
        let xx = try NoiseHandshakePattern(named: "XXpsk3")
        #expect(xx.messages.last == [.s, .se, .psk])
        let k1 = try NoiseHandshakePattern(named: "NK1")
        #expect(k1.responderPreMessage == [.s] && k1.messages == [[.e], [.e, .ee, .es]])
        #expect(try NoiseHandshakePattern(named: "X").isOneWay)
        #expect(try !NoiseHandshakePattern(named: "XX").isOneWay)
    }

    @Test func allRequiredPatternsParse() throws {
        let names = ["N", "K", "X", "NN", "NK", "NX", "KN", "KK", "KX", "XN", "XK", "XX", "IN", "IK", "IX",
                     "NK1", "NX1", "X1N", "X1K", "XK1", "X1K1", "X1X", "XX1", "X1X1", "K1N", "K1K", "KK1", "K1K1",
                     "K1X", "KX1", "K1X1", "I1N", "I1K", "IK1", "I1K1", "I1X", "IX1", "I1X1"]
        for name in names {
            let parsed = try NoiseProtocolName("Noise_\(name)_25519_ChaChaPoly_BLAKE2b")
            #expect(parsed.pattern.name == name)
        }
        #expect(Set(NoiseHandshakePattern.baseNames) == Set(names))
    }
}
