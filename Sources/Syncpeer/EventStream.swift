internal import Synchronization

/// What a session, an advertiser or a browser reports, as an `AsyncSequence` that never drops
/// anything silently: it holds at most `capacity` elements for a consumer that does not keep
/// up, and when more come it keeps the count of those it had to leave out and delivers it, in
/// order, as one element of its own (`Session.Event.eventsDropped`,
/// `Browser.Change.changesDropped`) before anything newer.
///
/// It ends when the consuming task is cancelled (`next` returns nil). One task iterates at a
/// time. Its subscription ends once neither the sequence nor an iterator of it remains.
public struct EventStream<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = Never
    let buffer: EventBuffer<Element>

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = Never
        let buffer: EventBuffer<Element>

        public mutating func next() async -> Element? { await buffer.next() }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? { await buffer.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(buffer: buffer) }
}

/// The bounded queue behind an `EventStream`: the engine's handlers `yield` (on its threads,
/// never waiting), the consumer awaits `next`.
final class EventBuffer<Element: Sendable>: Sendable {
    private enum Item {
        case element(Element)
        case dropped(Int)
    }

    private enum YieldOutcome {
        case resume(CheckedContinuation<Element?, Never>), held, dropped
    }

    private struct State {
        var items: [Item] = []
        var head = 0
        /// Elements (not drop counts) held.
        var held = 0
        var waiter: CheckedContinuation<Element?, Never>?
        var finished = false
    }

    let capacity: Int
    /// The element that reports `count` elements left out; nil: the caller of `yield` deals
    /// with what does not fit.
    private let dropped: (@Sendable (Int) -> Element)?
    private let state = Mutex(State())
    /// Ends the subscription that feeds the buffer (set once, after subscribing).
    private let onTermination = Mutex<(@Sendable () -> Void)?>(nil)

    init(capacity: Int, dropped: (@Sendable (Int) -> Element)?) {
        self.capacity = max(1, capacity)
        self.dropped = dropped
    }

    deinit {
        onTermination.withLock { $0 }?()
    }

    func whenTerminated(_ handler: @escaping @Sendable () -> Void) {
        onTermination.withLock { $0 = handler }
    }

    /// Adds `element` for the consumer; false when it did not fit (and was counted as dropped,
    /// when the buffer reports drops).
    @discardableResult
    func yield(_ element: Element) -> Bool {
        let outcome: YieldOutcome = state.withLock { state in
            if state.finished { return .dropped }
            if let waiter = state.waiter {
                state.waiter = nil
                return .resume(waiter)
            }
            if state.held < capacity {
                state.items.append(.element(element))
                state.held += 1
                return .held
            }
            guard dropped != nil else { return .dropped }
            if case let .dropped(count)? = state.items.last {
                state.items[state.items.count - 1] = .dropped(count + 1)
            } else {
                state.items.append(.dropped(1))
            }
            return .dropped
        }
        switch outcome {
        case let .resume(waiter):
            waiter.resume(returning: element)
            return true
        case .held:
            return true
        case .dropped:
            return false
        }
    }

    /// The next element, waiting for one; nil once the consuming task is cancelled.
    func next() async -> Element? {
        if let ready = take() { return ready }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now: Element?? = state.withLock { state in
                    if let item = Self.pop(&state) { return .some(map(item)) }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    state.waiter?.resume(returning: nil)
                    state.waiter = continuation
                    return .none
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }?.resume(returning: nil)
        }
    }

    private func take() -> Element? {
        state.withLock { Self.pop(&$0) }.map(map)
    }

    private func map(_ item: Item) -> Element {
        switch item {
        case let .element(element): element
        case let .dropped(count): dropped!(count)
        }
    }

    private static func pop(_ state: inout State) -> Item? {
        guard state.head < state.items.count else { return nil }
        let item = state.items[state.head]
        state.head += 1
        if case .element = item { state.held -= 1 }
        if state.head == state.items.count {
            state.items.removeAll(keepingCapacity: state.items.count <= 1024)
            state.head = 0
        } else if state.head > 64 && state.head * 2 > state.items.count {
            state.items.removeFirst(state.head)
            state.head = 0
        }
        return item
    }
}
