/// SPAKE2 in python-spake2's symmetric mode over Ed25519, as Magic Wormhole uses it: both
/// sides blind with the same point S, send `"S" || X*`, and hash a transcript whose two
/// messages are sorted, so neither side needs to know which one it is.
///
///     pw  = HKDF-SHA256(password, info "SPAKE2 pw", 48 bytes) big-endian mod L
///     X*  = x·B + pw·S                      (S = arbitraryElement("symmetric"))
///     K   = x·(Y* − pw·S)
///     key = SHA256(SHA256(password) || SHA256(idS) || min(X*,Y*) || max(X*,Y*) || K)
///
/// One instance does one exchange: `outboundMessage` once, then `finish` once.
package final class SPAKE2Symmetric: @unchecked Sendable {
    /// The length of a message on the wire: the side byte and one element.
    package static let messageLength = 33
    private static let sideByte = UInt8(ascii: "S")
    /// S, derived once from the seed "symmetric".
    static let blindingPoint = Ed25519Group.arbitraryElement(seed: Array("symmetric".utf8))

    private let password: SecureBytes
    private let identity: [UInt8]
    private let passwordScalar: SecureBytes
    private let secretScalar: SecureBytes
    private let outbound: [UInt8]
    private var finished = false

    /// A new exchange for `password` and the application's `identity` (Magic Wormhole's appid).
    package convenience init(password: [UInt8], identity: [UInt8]) {
        self.init(password: password, identity: identity, secretScalar: Ed25519Group.randomScalar())
    }

    /// An exchange with a chosen secret scalar (32 bytes little-endian): for known-answer tests.
    init(password: [UInt8], identity: [UInt8], secretScalar: SecureBytes) {
        self.password = SecureBytes(password)
        self.identity = identity
        self.passwordScalar = Self.passwordScalar(password)
        self.secretScalar = secretScalar
        guard let xB = Ed25519Group.baseMultiply(secretScalar),
              let blind = Ed25519Group.multiply(Self.blindingPoint, by: passwordScalar),
              let message = Ed25519Group.add(xB, blind)
        else { preconditionFailure("SPAKE2: a zero scalar (probability 2^-252)") }
        outbound = message
    }

    /// python-spake2's `password_to_scalar`.
    static func passwordScalar(_ password: [UInt8]) -> SecureBytes {
        let wide = HKDFSHA256.derive(inputKeyMaterial: password, info: Array("SPAKE2 pw".utf8), length: 48)
        return Ed25519Group.scalar(bigEndian: wide.unsafeCopy())
    }

    /// The message to send: `"S"` then X* (33 bytes).
    package var outboundMessage: [UInt8] { [Self.sideByte] + outbound }

    /// The shared key from the peer's message. Throws for a message of the wrong side or
    /// length, a point outside the group, our own message reflected, or a second call.
    /// Both sides get the same key only if they used the same password.
    package func finish(_ inbound: [UInt8]) throws -> SecureBytes {
        guard !finished else { throw CryptoError.handshake("SPAKE2 finish called twice") }
        finished = true
        guard inbound.count == Self.messageLength else {
            throw CryptoError.invalidLength(what: "SPAKE2 message", expected: Self.messageLength, actual: inbound.count)
        }
        guard inbound[0] == Self.sideByte else { throw CryptoError.handshake("SPAKE2 message is not from a symmetric side") }
        let element = Array(inbound[1...])
        guard Ed25519Group.isValidElement(element) else { throw CryptoError.invalidKey("SPAKE2 element") }
        guard element != outbound else { throw CryptoError.handshake("SPAKE2 message reflected back") }
        guard let unblind = Ed25519Group.multiply(Self.blindingPoint, by: Ed25519Group.negate(passwordScalar)),
              let yB = Ed25519Group.add(element, unblind),
              var shared = Ed25519Group.multiply(yB, by: secretScalar)
        else { throw CryptoError.invalidKey("SPAKE2 element") }
        defer { wipe(&shared) }
        let (first, second) = element.lexicographicallyPrecedes(outbound) ? (element, outbound) : (outbound, element)
        var transcript = SHA256.hash(password) + SHA256.hash(identity) + first + second + shared
        defer { wipe(&transcript) }
        return SecureBytes(SHA256.hash(transcript))
    }
}
