package import PeerFiles
package import PeerIndex
package import PeerNet

/// Errors of the engine. Each names what failed (path, peer, value) and says what to do,
/// in one line the CLI can print as it is. Failures of the lower layers keep their typed
/// error (`index`, `file`, `connection`), so callers can tell a full disk from a corrupt index; `kind`
/// names the case for scripts (the control socket and `--json` send it).
package enum EngineError: Error, Sendable, CustomStringConvertible {
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
    case index(IndexError)
    /// A file operation of the lower layer failed.
    case file(FileError)
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
    /// A byte stream was cut before its end (never reported as complete).
    case streamCut(String)
    /// A socket operation of the lower layer failed: what was being done, and why.
    case connection(String, NetError)
    /// An error the daemon reported over the control socket: its kind and its line.
    case daemon(kind: Kind, message: String)

    package var description: String {
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
        case let .index(error):
            return error.description
        case let .file(error):
            return error.description
        case let .daemon(_, message):
            return message
        case let .connection(what, error):
            return "\(what): \(error.description)"
        case let .io(path, reason):
            return path.isEmpty ? reason : "\(path): \(reason)"
        case let .invalidArgument(m), let .notFound(m), let .notConnected(m), let .refused(m), let .network(m), let .streamCut(m):
            return m
        }
    }

    /// What kind of failure this is, for exit codes.
    package var category: Category { kind.category }

    /// The case, by a stable name (the `kind` of JSON errors; see docs/JSON.md).
    package var kind: Kind {
        switch self {
        case .notInitialised: .notInitialised
        case .homeUnusable: .homeUnusable
        case .keyFileExposed: .keyFileExposed
        case .keyFileNotOwned: .keyFileNotOwned
        case .keyFileCorrupt: .keyFileCorrupt
        case .invalidDisplayName: .invalidDisplayName
        case .index: .index
        case .file: .file
        case .io: .io
        case .invalidArgument: .invalidArgument
        case .notFound: .notFound
        case .notConnected: .notConnected
        case .refused: .refused
        case .network, .connection: .network
        case .streamCut: .streamCut
        case let .daemon(kind, _): kind
        }
    }

    /// The kinds of engine errors, as scripts see them.
    package enum Kind: String, Sendable, Codable, CaseIterable {
        case notInitialised, homeUnusable, keyFileExposed, keyFileNotOwned, keyFileCorrupt, invalidDisplayName
        case index, file, io, invalidArgument, notFound, notConnected, refused, network, streamCut

        /// What kind of failure this is, for exit codes.
        package var category: Category {
            switch self {
            case .notInitialised, .notFound, .notConnected: .state
            case .invalidDisplayName, .invalidArgument: .usage
            case .refused, .network, .streamCut, .homeUnusable, .io, .file: .failure
            case .keyFileExposed, .keyFileNotOwned, .keyFileCorrupt, .index: .data
            }
        }
    }

    package enum Category: String, Sendable, Codable {
        case usage, state, data, failure
    }

    /// Wraps an error thrown by untyped code: engine errors as they are, the lower layers'
    /// typed errors in their case.
    static func wrapping(_ error: any Error) -> EngineError {
        switch error {
        case let error as EngineError: error
        case let error as IndexError: .index(error)
        case let error as FileError: .file(error)
        default: .io(path: "", reason: "\(error)")
        }
    }
}
