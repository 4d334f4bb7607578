internal import Dispatch
internal import PeerIndex
internal import Synchronization

/// A background step (a pull, an apply) whose index read fails (issue 42.2): it stops
/// before acting on the empty answer — "no record" would make a file new, deleted or absent
/// and overwrite or delete data — keeps every state as it was, shows the cause as the
/// folder's error (and its event), and a whole pull tries again after `indexRetrySeconds`. The
/// first pull that reads the index again clears that error.
///
///     pull ─▶ read ─(IndexError)─▶ indexFailed: error in status, event ─▶ retry ─▶ pull
///               └─(read)─▶ indexRead: the error it showed goes
extension SharedFolder {
    /// How long after a failed read a pull tries again (seconds).
    static let indexRetrySeconds = 5

    /// `step` stopped on `error` (io). Returns 0: the blocks a pull was given are not used.
    @discardableResult
    func indexFailed(_ step: String, _ error: IndexError) -> Int {
        dispatchPrecondition(condition: .onQueue(io))
        let message = "\(step) stopped, nothing changed: cannot read the index: \(error.description) (tried again in "
            + "\(Self.indexRetrySeconds) s)"
        let (shown, schedule) = state.withLock { state in
            defer { (state.indexFailure, state.indexRetryDue) = (message, true) }
            return (state.indexFailure == message, !state.indexRetryDue)
        }
        if !shown { setError(message) }
        if schedule {
            io.asyncAfter(deadline: .now() + .seconds(Self.indexRetrySeconds)) { [weak self] in
                guard let self else { return }
                // (Only while the folder runs: a stopped one is started again whole.)
                guard state.withLock({ state in
                    state.indexRetryDue = false
                    return state.ticking
                }) else { return }
                pull(paths: nil)
            }
        }
        return 0
    }

    /// A pull read the index (io): the error a failed read showed goes, if it is still shown.
    func indexRead() {
        guard let shown = state.withLock({ state in defer { state.indexFailure = nil }; return state.indexFailure }) else { return }
        clearError(only: shown)
    }
}
