#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import Dispatch
internal import Synchronization

/// Catches Ctrl-C (SIGINT) while a command runs: the first one calls `onInterrupt` (the
/// command then winds down and says what it did); a second one ends the process at once.
final class InterruptWatch: Sendable {
    /// The signal source (set once, by `start`; a dispatch source is not Sendable, so it lives
    /// behind a lock).
    private let source = Mutex<(any DispatchSourceSignal)?>(nil)
    /// Whether Ctrl-C came.
    private let state = Mutex(false)
    private let onInterrupt: @Sendable () -> Void

    init(_ onInterrupt: @escaping @Sendable () -> Void) {
        self.onInterrupt = onInterrupt
        signal(SIGINT, SIG_IGN)
        start()
    }

    /// Makes the source inside the lock (it cannot be handed in); nothing here calls out.
    private func start() {
        source.withLock { source in
            let made = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
            made.setEventHandler { [self] in interruptReceived() }
            made.resume()
            source = made
        }
    }

    private func interruptReceived() {
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

    var interrupted: Bool { state.withLock { $0 } }

    /// Stops catching Ctrl-C.
    func stop() {
        source.withLock { $0 }?.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
