/// Why a peer closes a connection (the code of a ``Frame/close(code:reason:)`` frame).
///
/// Codes this version does not know are kept as ``unknown(_:)``, so that a newer peer's reason
/// can still be reported; a node treats such a code as a refusal (it does not redial), as
/// versions before `tryLater` treat `tryLater` itself. Two codes are equal when their raw values are: `.unknown(0)` equals
/// `.normal`, and decoding always yields the named case.
package enum CloseCode: Hashable, Sendable {
    /// The peer is done; nothing went wrong.
    case normal
    /// We received something that violates the protocol.
    case protocolError
    /// The peer could not be authenticated.
    case authFailed
    /// The peer is not paired with us and this is no invitation.
    case notPaired
    /// The peer's key does not match the device it claims to be.
    case impersonation
    /// The peer did not answer in time (keepalive or invitation).
    case timeout
    /// The node is stopping.
    case shuttingDown
    /// The peer removed its pairing with us (`syncpeer unpair`): it will refuse us from now on.
    case unpaired
    /// The peer refused us for a passing reason (it cannot read its paired peers now, its slots
    /// for connections are full): dial it again later, with the redials' back-off.
    case tryLater
    /// A code this version does not know.
    case unknown(UInt16)

    /// The code for `rawValue`; every value maps to a code.
    package init(rawValue: UInt16) {
        switch rawValue {
        case 0: self = .normal
        case 1: self = .protocolError
        case 2: self = .authFailed
        case 3: self = .notPaired
        case 4: self = .impersonation
        case 5: self = .timeout
        case 6: self = .shuttingDown
        case 7: self = .unpaired
        case 8: self = .tryLater
        default: self = .unknown(rawValue)
        }
    }

    /// The 2-byte code on the wire.
    package var rawValue: UInt16 {
        switch self {
        case .normal: 0
        case .protocolError: 1
        case .authFailed: 2
        case .notPaired: 3
        case .impersonation: 4
        case .timeout: 5
        case .shuttingDown: 6
        case .unpaired: 7
        case .tryLater: 8
        case let .unknown(value): value
        }
    }

    package static func == (lhs: CloseCode, rhs: CloseCode) -> Bool {
        lhs.rawValue == rhs.rawValue
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(rawValue)
    }
}
