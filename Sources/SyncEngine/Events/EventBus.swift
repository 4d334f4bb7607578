internal import Synchronization

/// Where a service reports what happened: the one role every service needs, so each can be
/// tested with a sink that records (`EventBusTests`) instead of a node.
protocol EventSink: Sendable {
    func emit(_ event: NodeEvent)
}

/// The node's events and who listens to them: the control socket's `events` clients, the
/// daemon's output, the public API's sessions, the dashboard. It owns its subscribers
/// behind a `Mutex` (checked by the compiler, not confined to a queue by convention), so
/// subscribing never waits for the node's queue — a handler may subscribe or unsubscribe
/// from inside a callback without a deadlock.
///
/// Delivery is synchronous, in the emitter's order: each event reaches every subscriber
/// present when it was emitted before `emit` returns, outside the lock. Handlers must not
/// block (the control socket's hand events to a bounded outbox).
final class EventBus: EventSink, Sendable {
    private struct Subscribers {
        var next: UInt64 = 1
        var events: [UInt64: @Sendable (NodeEvent) -> Void] = [:]
        /// Message bodies as bytes (events carry them as text), for the public API.
        var messages: [UInt64: @Sendable (PeerRef, [UInt8]) -> Void] = [:]

        mutating func token() -> UInt64 {
            defer { next += 1 }
            return next
        }
    }

    private let subscribers = Mutex(Subscribers())

    /// Adds a handler for every event; the token ends it (`unsubscribe`).
    func subscribe(_ handler: @escaping @Sendable (NodeEvent) -> Void) -> UInt64 {
        subscribers.withLock { state in
            let token = state.token()
            state.events[token] = handler
            return token
        }
    }

    /// Adds a handler for every message's body.
    func subscribeMessages(_ handler: @escaping @Sendable (PeerRef, [UInt8]) -> Void) -> UInt64 {
        subscribers.withLock { state in
            let token = state.token()
            state.messages[token] = handler
            return token
        }
    }

    /// Ends a subscription of either kind; an event being delivered may still reach it.
    func unsubscribe(_ token: UInt64) {
        subscribers.withLock { state in
            state.events[token] = nil
            state.messages[token] = nil
        }
    }

    func emit(_ event: NodeEvent) {
        let handlers = subscribers.withLock { Array($0.events.values) }
        for handler in handlers { handler(event) }
    }

    func deliverMessage(from peer: PeerRef, body: [UInt8]) {
        let handlers = subscribers.withLock { Array($0.messages.values) }
        for handler in handlers { handler(peer, body) }
    }
}
