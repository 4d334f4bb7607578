internal import Synchronization

/// Lets the client of a `send` cancel it at any point: before the offer exists (while the
/// source is chunked) or after. The node attaches the transfer's ID once it has one; a
/// cancel that came earlier is carried out at that moment, one that comes later returns
/// the ID to cancel.
package final class SendCancellation: Sendable {
    private let state = Mutex<(cancelled: Bool, id: String?)>((false, nil))

    package init() {}

    /// Marks the send cancelled; returns the transfer's ID (hex) when it already has one.
    package func cancel() -> String? {
        state.withLock { state in
            state.cancelled = true
            return state.id
        }
    }

    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Called by the node once the transfer has `id`; false when the send was cancelled
    /// before (the node then cancels it itself).
    func attach(_ id: String) -> Bool {
        state.withLock { state in
            state.id = id
            return !state.cancelled
        }
    }
}
