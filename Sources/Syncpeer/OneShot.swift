internal import Synchronization

/// One answer for one waiting task, given once by whichever comes first: the operation's
/// callback (on any thread), a timer, or the task's cancellation. It bridges the engine's
/// callbacks to `async` without a thread of its own: the waiting task is suspended, not
/// blocked.
final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, SyncpeerError>?
        var continuation: CheckedContinuation<Result<Value, SyncpeerError>, Never>?
    }

    private let state = Mutex(State())

    /// Gives the answer; false when one was given already (this one is ignored).
    @discardableResult
    func resolve(_ result: Result<Value, SyncpeerError>) -> Bool {
        let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Result<Value, SyncpeerError>, Never>?) in
            guard state.result == nil else { return (false, nil) }
            state.result = result
            defer { state.continuation = nil }
            return (true, state.continuation)
        }
        waiter?.resume(returning: result)
        return first
    }

    /// Waits for the answer. When the task is cancelled first, `onCancel` runs (at once if it
    /// is cancelled already); by default it answers `.cancelled`.
    func value(onCancel: (@Sendable () -> Void)? = nil) async throws(SyncpeerError) -> Value {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let early = state.withLock { state -> Result<Value, SyncpeerError>? in
                    if let result = state.result { return result }
                    state.continuation = continuation
                    return nil
                }
                if let early { continuation.resume(returning: early) }
            }
        } onCancel: {
            if let onCancel { onCancel() } else { resolve(.failure(.cancelled)) }
        }
        return try result.get()
    }
}
