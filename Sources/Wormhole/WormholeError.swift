/// Wormhole: Magic Wormhole's protocols spoken by syncpeer — the mailbox (rendezvous) client
/// over WebSocket, the SPAKE2 key exchange and encrypted phases, Transit and the
/// file-transfer offer/answer — so `syncpeer send --code` and `syncpeer receive CODE` work
/// with the `wormhole` CLI and every other Magic Wormhole client.
/// Silent: it reports through callbacks and errors, never prints.

/// The one error type of the Wormhole module: what failed, in a line a user can act on.
package enum WormholeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The other side used a different code (the SPAKE2 keys differ).
    case wrongCode
    /// A code that is not `NAMEPLATE-WORD-WORD…`.
    case invalidCode(String)
    /// The mailbox server could not be reached or refused us.
    case server(String)
    /// The peer or server sent something malformed or over a bound.
    case protocolViolation(String)
    /// The peer ended the exchange with an error message.
    case remote(String)
    /// The transfer failed on our side (file system, hash mismatch, transit).
    case transfer(String)
    /// Nothing happened in time.
    case timedOut(String)

    package var description: String {
        switch self {
        case .wrongCode:
            return "key confirmation failed: you or your correspondent typed the code wrong (or someone guessed it wrong); nothing was transferred; try again with a new code"
        case let .invalidCode(why): return "invalid wormhole code: \(why)"
        case let .server(why): return "mailbox server: \(why)"
        case let .protocolViolation(why): return "wormhole protocol violation: \(why)"
        case let .remote(why): return "the other side gave up: \(why)"
        case let .transfer(why): return "transfer failed: \(why)"
        case let .timedOut(what): return "timed out: \(what)"
        }
    }
}
