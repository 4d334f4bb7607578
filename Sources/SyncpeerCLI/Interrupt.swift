#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import Dispatch
internal import Synchronization

/// Catches Ctrl-C (SIGINT) while a command runs: the first one calls `onInterrupt` (the
/// command then winds down and says what it did); a second one ends the process at once.
final class InterruptWatch: @unchecked Sendable {
    // @unchecked: `source` is set once in init; DispatchSource is thread-safe.
    private let source: any DispatchSourceSignal
    private let state = Mutex(false)

    init(_ onInterrupt: @escaping @Sendable () -> Void) {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { [self] in
            let first = state.withLock { interrupted in
                defer { interrupted = true }
                return !interrupted
            }
            if first {
                // A second Ctrl-C is not caught.
                signal(SIGINT, SIG_DFL)
                onInterrupt()
            }
        }
        source.resume()
    }

    var interrupted: Bool { state.withLock { $0 } }

    /// Stops catching Ctrl-C.
    func stop() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
