internal import Synchronization

/// The dashboard's request slots, so that any number of local connections that send slowly
/// never keep the logged-in user's requests out:
///
///     accept ──► reading slot (at most `readers`; when all are taken, the connection that
///                │             has been reading the longest is closed to make room)
///                ├─ no session: answered from it at once (a refusal or a login, a few
///                │              hundred bytes, which the socket's buffer takes)
///                └─ a session:  serving slot (at most `servers`, 503 beyond) while the
///                               answer is made, which may wait on the daemon
///
/// A browser's request arrives in a moment: the oldest reader is whoever sends slowest, and
/// to push out a request that is arriving, `readers` newer connections would have to be
/// accepted before its last byte. Serving slots are taken only with a session's cookie.
final class ConnectionSlots: Sendable {
    struct Ticket: Hashable, Sendable {
        fileprivate let number: UInt64
    }

    private struct State {
        var next: UInt64 = 0
        /// Oldest first, each with what closes its connection.
        var reading: [(ticket: Ticket, evict: @Sendable () -> Void)] = []
        var serving = 0
    }

    let readers: Int
    let servers: Int
    private let state = Mutex(State())

    init(readers: Int, servers: Int) {
        self.readers = readers
        self.servers = servers
    }

    /// A reading slot for a new connection; when all are taken, the oldest reader's is
    /// freed and `evict` of that reader called (after the lock: it closes a socket).
    func admit(evict: @escaping @Sendable () -> Void) -> Ticket {
        let (ticket, evicted) = state.withLock { state -> (Ticket, (@Sendable () -> Void)?) in
            let evicted = state.reading.count >= readers ? state.reading.removeFirst().evict : nil
            state.next += 1
            let ticket = Ticket(number: state.next)
            state.reading.append((ticket, evict))
            return (ticket, evicted)
        }
        evicted?()
        return ticket
    }

    /// Gives a reading slot back (the request was answered or given up, or it was evicted).
    func leaveReading(_ ticket: Ticket) {
        state.withLock { $0.reading.removeAll { $0.ticket == ticket } }
    }

    /// Trades the reading slot for a serving slot; false when all serving slots are taken
    /// (the request then holds neither).
    func startServing(_ ticket: Ticket) -> Bool {
        state.withLock { state -> Bool in
            state.reading.removeAll { $0.ticket == ticket }
            guard state.serving < servers else { return false }
            state.serving += 1
            return true
        }
    }

    func finishServing() {
        state.withLock { $0.serving -= 1 }
    }

    /// Slots taken now (for tests).
    var taken: (reading: Int, serving: Int) {
        state.withLock { ($0.reading.count, $0.serving) }
    }
}
