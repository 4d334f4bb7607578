package import SyncEngine

/// Errors that end a command, each with the exit code it maps to.
///
/// Exit codes (documented in the README):
///   0 success · 1 the operation failed · 2 usage error (bad flags or arguments)
///   3 missing state (not initialised, no daemon, unknown peer) · 4 damaged data (key file, index)
package enum CLIError: Error, Equatable, Sendable, CustomStringConvertible {
    case usage(String)
    case state(String)
    case data(String)
    case failure(String)
    /// An error of the engine (or of the daemon), with its kind.
    case engine(EngineError.Kind, String)

    package var description: String {
        switch self {
        case let .usage(m), let .state(m), let .data(m), let .failure(m), let .engine(_, m): return m
        }
    }

    package var exitCode: Int32 {
        switch self {
        case .failure: return ExitCode.failure
        case .usage: return ExitCode.usage
        case .state: return ExitCode.state
        case .data: return ExitCode.data
        case let .engine(kind, _):
            switch kind.category {
            case .usage: return ExitCode.usage
            case .state: return ExitCode.state
            case .data: return ExitCode.data
            case .failure: return ExitCode.failure
            }
        }
    }

    /// The `kind` of a JSON error: the engine's kind, else the exit category.
    package var kind: String {
        switch self {
        case .usage: return "usage"
        case .state: return "state"
        case .data: return "data"
        case .failure: return "failure"
        case let .engine(kind, _): return kind.rawValue
        }
    }
}

/// An error as `--json` prints it (on standard error): see docs/JSON.md.
struct JSONError: Encodable {
    let error: String
    let kind: String
    let exit: Int32

    init(error: String, kind: String, exit: Int32) {
        self.error = error
        self.kind = kind
        self.exit = exit
    }

    init(_ error: CLIError) {
        self.error = error.description
        kind = error.kind
        exit = error.exitCode
    }
}

/// The process exit codes.
package enum ExitCode {
    package static let success: Int32 = 0
    package static let failure: Int32 = 1
    package static let usage: Int32 = 2
    package static let state: Int32 = 3
    package static let data: Int32 = 4
    /// Stopped by Ctrl-C (SIGINT), as shells count it: 128 + 2.
    package static let interrupted: Int32 = 130
}
