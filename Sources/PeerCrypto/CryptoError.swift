/// Errors of the crypto module. Each says what failed and, where it helps, what to do.
package enum CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidLength(what: String, expected: Int, actual: Int)
    case invalidKey(String)
    /// An AEAD tag did not verify: the data was tampered with or the key is wrong.
    case authenticationFailed
    /// A cipher's nonce counter is exhausted; the session must be rekeyed or restarted.
    case nonceExhausted
    case invalidDeviceID(String)
    /// A Noise handshake was driven out of order or with missing keys.
    case handshake(String)
    case unsupported(String)
    /// A TLS session with a relay or discovery server failed (OpenSSL's reason).
    case tls(String)

    package var description: String {
        switch self {
        case let .invalidLength(what, expected, actual):
            return "\(what) must be \(expected) bytes, got \(actual)"
        case let .invalidKey(what):
            return "invalid \(what)"
        case .authenticationFailed:
            return "authentication failed: the data was modified in transit or the key is wrong"
        case .nonceExhausted:
            return "cipher nonce exhausted; the connection must be re-established"
        case let .invalidDeviceID(why):
            return "invalid device ID: \(why)"
        case let .handshake(why):
            return "Noise handshake error: \(why)"
        case let .unsupported(what):
            return "unsupported: \(what)"
        case let .tls(why):
            return "TLS: \(why)"
        }
    }
}
