/// Errors of the engine. Each names what failed (path, peer, value) and says what to do,
/// in one line the CLI can print as it is.
public enum EngineError: Error, Sendable, CustomStringConvertible {
    /// The home has no identity yet.
    case notInitialised(home: String)
    /// The home directory cannot be created or used.
    case homeUnusable(path: String, reason: String)
    /// The key file is readable by others.
    case keyFileExposed(path: String, mode: UInt32)
    /// The key file belongs to another user (who could replace it: it is not our identity).
    case keyFileNotOwned(path: String, owner: UInt32, user: UInt32)
    /// The key file exists but does not hold a valid key.
    case keyFileCorrupt(path: String, reason: String)
    /// A display name breaks the rules (1–63 bytes of UTF-8, no control characters).
    case invalidDisplayName(String)
    /// The node's index could not be opened or used.
    case index(String)
    /// A file operation failed.
    case io(path: String, reason: String)
    /// A value given by the user is not acceptable.
    case invalidArgument(String)
    /// A peer, invitation or daemon was not found.
    case notFound(String)
    /// The peer is known but has no connected session.
    case notConnected(String)
    /// The peer refused, or we refused the peer.
    case refused(String)
    /// A connection could not be made or was lost.
    case network(String)

    public var description: String {
        switch self {
        case let .notInitialised(home):
            return "no identity in \(home): run 'syncpeer init' first"
        case let .homeUnusable(path, reason):
            return "cannot use home \(path): \(reason)"
        case let .keyFileExposed(path, mode):
            return "key file \(path) has mode \(String(mode, radix: 8)); it must be readable by its owner only: run 'chmod 600 \(path)'"
        case let .keyFileNotOwned(path, owner, user):
            return "key file \(path) belongs to user \(owner), not to you (user \(user)); it is refused because its owner could replace your identity: use your own home (--home or SYNCPEER_HOME), or if the file is yours run 'chown \(user) \(path)'"
        case let .keyFileCorrupt(path, reason):
            return "key file \(path) is corrupt (\(reason)); restore it from a backup, or move it away and run 'syncpeer init' to create a new identity (peers will have to pair again)"
        case let .invalidDisplayName(why):
            return "invalid display name: \(why)"
        case let .index(message):
            return message
        case let .io(path, reason):
            return "\(path): \(reason)"
        case let .invalidArgument(m), let .notFound(m), let .notConnected(m), let .refused(m), let .network(m):
            return m
        }
    }

    /// What kind of failure this is, for exit codes.
    public var category: Category {
        switch self {
        case .notInitialised: return .state
        case .invalidDisplayName, .invalidArgument: return .usage
        case .notFound, .notConnected: return .state
        case .refused, .network: return .failure
        case .keyFileExposed, .keyFileNotOwned, .keyFileCorrupt, .index: return .data
        case .homeUnusable, .io: return .failure
        }
    }

    public enum Category: Sendable {
        case usage, state, data, failure
    }
}
