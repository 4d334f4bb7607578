internal import SyncEngine

/// An error of the API: which kind of failure (the case, to switch on) and what went wrong,
/// in one line for people (`description`, also the case's associated text).
public enum SyncpeerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A value given to the API is not acceptable (a name, an address, a size).
    case invalidArgument(String)
    /// The home folder cannot be created or used.
    case home(String)
    /// The identity key in the home is missing, unsafe or unreadable.
    case identityKey(String)
    /// The node's index (its database) cannot be read or written: damaged, foreign, or a
    /// failing disk. Never shown as an empty answer.
    case index(String)
    /// A file operation failed (a full disk, a missing or unreadable file).
    case file(String)
    /// A peer, invitation, stream or folder was not found.
    case notFound(String)
    /// The peer is known but has no connected session.
    case notConnected(String)
    /// The peer refused, or this node refused the peer.
    case refused(String)
    /// A connection could not be made or was lost, or nothing came in time.
    case network(String)
    /// A byte stream was cut before its end (never reported as complete).
    case streamCut(String)
    /// The calling task was cancelled (the API's `CancellationError`: a typed throw cannot
    /// be one). The operation stopped; what it says of the object is in its documentation.
    case cancelled

    public var description: String {
        switch self {
        case let .invalidArgument(text), let .home(text), let .identityKey(text), let .index(text), let .file(text),
             let .notFound(text), let .notConnected(text), let .refused(text), let .network(text), let .streamCut(text):
            text
        case .cancelled:
            "cancelled"
        }
    }

    init(_ error: EngineError) {
        let text = error.description
        switch error.kind {
        case .invalidArgument, .invalidDisplayName: self = .invalidArgument(text)
        case .notInitialised, .homeUnusable: self = .home(text)
        case .keyFileExposed, .keyFileNotOwned, .keyFileCorrupt: self = .identityKey(text)
        case .index: self = .index(text)
        case .file, .io: self = .file(text)
        case .notFound: self = .notFound(text)
        case .notConnected: self = .notConnected(text)
        case .refused: self = .refused(text)
        case .network: self = .network(text)
        case .streamCut: self = .streamCut(text)
        }
    }
}
