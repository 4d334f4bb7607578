/// Errors that end a command, each with the exit code it maps to.
///
/// Exit codes (documented in the README):
///   0 success · 1 the operation failed · 2 usage error (bad flags or arguments)
///   3 missing state (not initialised, no daemon, unknown peer) · 4 damaged data (key file, index)
public enum CLIError: Error, Equatable, Sendable, CustomStringConvertible {
    case usage(String)
    case state(String)
    case data(String)
    case failure(String)

    public var description: String {
        switch self {
        case let .usage(m), let .state(m), let .data(m), let .failure(m): return m
        }
    }

    public var exitCode: Int32 {
        switch self {
        case .failure: return ExitCode.failure
        case .usage: return ExitCode.usage
        case .state: return ExitCode.state
        case .data: return ExitCode.data
        }
    }
}

/// The process exit codes.
public enum ExitCode {
    public static let success: Int32 = 0
    public static let failure: Int32 = 1
    public static let usage: Int32 = 2
    public static let state: Int32 = 3
    public static let data: Int32 = 4
}
