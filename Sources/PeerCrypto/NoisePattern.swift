/// A token of a Noise message pattern (spec section 7.1, and `psk` from section 9).
package enum NoiseToken: String, Sendable, Hashable, CaseIterable {
    case e, s, ee, es, se, ss, psk
}

/// A Noise handshake pattern: pre-messages and the message sequence (spec section 7).
///
/// Messages alternate between the parties, starting with the initiator, so a message's
/// sender is given by its index (even: initiator, odd: responder).
package struct NoiseHandshakePattern: Sendable, Hashable, CustomStringConvertible {
    /// The pattern name with its modifiers, e.g. `XX` or `NKpsk0+psk2`.
    package let name: String
    /// Keys the initiator's peer knows before the handshake (`-> s` above the `...`).
    package let initiatorPreMessage: [NoiseToken]
    /// Keys the initiator knows of the responder before the handshake (`<- s`).
    package let responderPreMessage: [NoiseToken]
    /// The handshake messages, in order.
    package let messages: [[NoiseToken]]
    /// One-way patterns (N, K, X) have a single message, and only the initiator sends
    /// transport messages afterwards.
    package let isOneWay: Bool

    package init(name: String, initiatorPreMessage: [NoiseToken] = [], responderPreMessage: [NoiseToken] = [],
                messages: [[NoiseToken]], isOneWay: Bool = false) {
        self.name = name
        self.initiatorPreMessage = initiatorPreMessage
        self.responderPreMessage = responderPreMessage
        self.messages = messages
        self.isOneWay = isOneWay
    }

    /// True when a `psk` token appears: then `e` tokens also call MixKey (spec section 9.2).
    package var isPSKHandshake: Bool { messages.contains { $0.contains(.psk) } }

    /// The number of pre-shared keys the pattern consumes.
    package var pskCount: Int { messages.reduce(0) { $0 + $1.filter { $0 == .psk }.count } }

    /// The pattern in the spec's notation, for diagnostics.
    package var description: String {
        var lines = [name + ":"]
        for token in initiatorPreMessage { lines.append("  -> \(token.rawValue)") }
        for token in responderPreMessage { lines.append("  <- \(token.rawValue)") }
        if !initiatorPreMessage.isEmpty || !responderPreMessage.isEmpty { lines.append("  ...") }
        for (i, message) in messages.enumerated() {
            lines.append("  \(i % 2 == 0 ? "->" : "<-") " + message.map(\.rawValue).joined(separator: ", "))
        }
        return lines.joined(separator: "\n")
    }

    /// A pattern by name: a base pattern (fundamental, one-way or deferred) followed by
    /// optional `pskN` modifiers joined with `+`, e.g. `XXpsk3` or `NNpsk0+psk2`.
    package init(named fullName: String) throws(CryptoError) {
        // Longest base-name prefix, so "NK1psk0" is NK1 + psk0 and not NK + "1psk0".
        guard let base = Self.baseNames.filter({ fullName.hasPrefix($0) }).max(by: { $0.count < $1.count }),
              let pattern = Self.base(base) else {
            throw .unsupported("Noise handshake pattern '\(fullName)'")
        }
        let modifierText = fullName.dropFirst(base.count)
        var messages = pattern.messages
        if !modifierText.isEmpty {
            var seen = Set<Int>()
            for modifier in modifierText.split(separator: "+", omittingEmptySubsequences: false) {
                let digits = modifier.dropFirst(3)
                guard modifier.hasPrefix("psk"), !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
                      let n = Int(digits) else {
                    throw .unsupported("Noise pattern modifier '\(modifier)' in '\(fullName)' (only pskN is supported)")
                }
                guard seen.insert(n).inserted else {
                    throw .unsupported("Noise pattern '\(fullName)' repeats modifier psk\(n)")
                }
                guard n <= messages.count else {
                    throw .unsupported("Noise pattern '\(fullName)': psk\(n) needs at least \(n) messages, \(base) has \(messages.count)")
                }
                // psk0 opens the first message; pskN closes message N (1-based).
                if n == 0 { messages[0].insert(.psk, at: 0) } else { messages[n - 1].append(.psk) }
            }
        }
        self.init(name: fullName, initiatorPreMessage: pattern.initiatorPreMessage,
                  responderPreMessage: pattern.responderPreMessage, messages: messages, isOneWay: pattern.isOneWay)
    }

    /// Every supported base pattern name.
    package static var baseNames: [String] { table.map(\.0) }

    private static func base(_ name: String) -> NoiseHandshakePattern? {
        guard let entry = table.first(where: { $0.0 == name }) else { return nil }
        return NoiseHandshakePattern(name: name, initiatorPreMessage: entry.1, responderPreMessage: entry.2,
                                     messages: entry.3, isOneWay: name.count == 1)
    }

    // Shorthands for the table below.
    private static let e = NoiseToken.e, s = NoiseToken.s, ee = NoiseToken.ee
    private static let es = NoiseToken.es, se = NoiseToken.se, ss = NoiseToken.ss

    /// (name, initiator pre-message, responder pre-message, messages), from spec sections
    /// 7.4 (one-way), 7.5 (interactive) and 18 (deferred).
    private static let table: [(String, [NoiseToken], [NoiseToken], [[NoiseToken]])] = [
        // One-way.
        ("N", [], [s], [[e, es]]),
        ("K", [s], [s], [[e, es, ss]]),
        ("X", [], [s], [[e, es, s, ss]]),
        // Fundamental interactive.
        ("NN", [], [], [[e], [e, ee]]),
        ("NK", [], [s], [[e, es], [e, ee]]),
        ("NX", [], [], [[e], [e, ee, s, es]]),
        ("KN", [s], [], [[e], [e, ee, se]]),
        ("KK", [s], [s], [[e, es, ss], [e, ee, se]]),
        ("KX", [s], [], [[e], [e, ee, se, s, es]]),
        ("XN", [], [], [[e], [e, ee], [s, se]]),
        ("XK", [], [s], [[e, es], [e, ee], [s, se]]),
        ("XX", [], [], [[e], [e, ee, s, es], [s, se]]),
        ("IN", [], [], [[e, s], [e, ee, se]]),
        ("IK", [], [s], [[e, es, s, ss], [e, ee, se]]),
        ("IX", [], [], [[e, s], [e, ee, se, s, es]]),
        // Deferred.
        ("NK1", [], [s], [[e], [e, ee, es]]),
        ("NX1", [], [], [[e], [e, ee, s], [es]]),
        ("X1N", [], [], [[e], [e, ee], [s], [se]]),
        ("X1K", [], [s], [[e, es], [e, ee], [s], [se]]),
        ("XK1", [], [s], [[e], [e, ee, es], [s, se]]),
        ("X1K1", [], [s], [[e], [e, ee, es], [s], [se]]),
        ("X1X", [], [], [[e], [e, ee, s, es], [s], [se]]),
        ("XX1", [], [], [[e], [e, ee, s], [es, s, se]]),
        ("X1X1", [], [], [[e], [e, ee, s], [es, s], [se]]),
        ("K1N", [s], [], [[e], [e, ee], [se]]),
        ("K1K", [s], [s], [[e, es], [e, ee], [se]]),
        ("KK1", [s], [s], [[e], [e, ee, se, es]]),
        ("K1K1", [s], [s], [[e], [e, ee, es], [se]]),
        ("K1X", [s], [], [[e], [e, ee, s, es], [se]]),
        ("KX1", [s], [], [[e], [e, ee, se, s], [es]]),
        ("K1X1", [s], [], [[e], [e, ee, s], [se, es]]),
        ("I1N", [], [], [[e, s], [e, ee], [se]]),
        ("I1K", [], [s], [[e, es, s], [e, ee], [se]]),
        ("IK1", [], [s], [[e, s], [e, ee, se, es]]),
        ("I1K1", [], [s], [[e, s], [e, ee, es], [se]]),
        ("I1X", [], [], [[e, s], [e, ee, s, es], [se]]),
        ("IX1", [], [], [[e, s], [e, ee, se, s], [es]]),
        ("I1X1", [], [], [[e, s], [e, ee, s], [se, es]]),
    ]
}

/// A full Noise protocol name, `Noise_<pattern>_25519_<cipher>_<hash>`, parsed: DH 25519,
/// cipher `ChaChaPoly` or `AESGCM`, hash `BLAKE2b` or `SHA256`.
///
/// Other functions (448, SHA512, BLAKE2s) are refused loudly rather than silently run as
/// a different suite.
package struct NoiseProtocolName: Sendable, Hashable, CustomStringConvertible {
    /// The only DH function supported.
    package static let dhName = "25519"

    /// The exact name, which is hashed into the handshake (so it must be byte-identical
    /// on both sides).
    package let name: String
    package let pattern: NoiseHandshakePattern
    package let cipher: NoiseCipherFunction
    package let hash: NoiseHashFunction

    package init(_ name: String) throws(CryptoError) {
        let parts = name.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "Noise" else {
            throw .unsupported("Noise protocol name '\(name)': expected Noise_<pattern>_<dh>_<cipher>_<hash>")
        }
        guard parts[2] == Self.dhName else {
            throw .unsupported("Noise DH function '\(parts[2])' in '\(name)' (only \(Self.dhName))")
        }
        guard let cipher = NoiseCipherFunction(rawValue: String(parts[3])) else {
            throw .unsupported("Noise cipher '\(parts[3])' in '\(name)' (only \(NoiseCipherFunction.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        guard let hash = NoiseHashFunction(rawValue: String(parts[4])) else {
            throw .unsupported("Noise hash '\(parts[4])' in '\(name)' (only \(NoiseHashFunction.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        self.name = name
        self.cipher = cipher
        self.hash = hash
        self.pattern = try NoiseHandshakePattern(named: String(parts[1]))
    }

    package var description: String { name }
}
