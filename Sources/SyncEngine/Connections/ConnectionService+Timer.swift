internal import Dispatch
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// The connections' timer: keepalive, dead peers, invitation expiry and redials
/// (`TimerMachine` decides), direct paths and round trips (ConnectionService+Paths).
///
/// One one-shot timer on `queue`, set after each tick for the earliest deadline it leaves;
/// with nothing due it sleeps until woken. An idle node with one peer wakes for that peer's
/// keepalive (every `keepaliveInterval`), not 4 times a second as it did with a 250 ms beat.
/// Whatever makes a deadline earlier than the one set calls `wakeTimer` (a session begins,
/// an invitation is raised, a redial is planned or moved). A stall or a failed send that
/// starts while the timer sleeps is seen at its next wake: at most `keepaliveInterval` later,
/// since every session's keepalive is due by then.
extension ConnectionService {
    /// How much after its deadline the timer may fire (lets the kernel coalesce wakeups).
    static let timerLeeway: DispatchTimeInterval = .milliseconds(20)

    /// Starts the timer and dials the paired peers (on `queue`): at once, not at the first
    /// deadline, so a restarted node is back in its transfers as soon as it listens (bench
    /// "resume").
    func startTimer() {
        dispatchPrecondition(condition: .onQueue(queue))
        // Made inside the lock: a timer is not Sendable, so it cannot be handed in. Nothing
        // here calls out (it fires on `queue`, which runs this).
        state.withLock { [queue] state in
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.setEventHandler { [weak self] in self?.tick() }
            timer.schedule(deadline: .distantFuture, repeating: .never)
            timer.resume()
            state.timer = timer
        }
        scheduleInitialRedials()
        tick()
    }

    /// Makes the timer fire at `deadline` (now by default) unless it is set to fire sooner.
    /// Any thread; nothing after `stop`.
    func wakeTimer(at deadline: ContinuousClock.Instant = .now) {
        state.withLock { state in
            guard let timer = state.timer, state.timerDue.map({ deadline < $0 }) ?? true else { return }
            state.timerDue = deadline
            timer.schedule(deadline: Self.dispatchTime(deadline), repeating: .never, leeway: Self.timerLeeway)
        }
    }

    /// `instant` on the dispatch clock (as an offset from now: the two clocks differ); at most
    /// a day on (a tick then sets it again), so no configured timeout overflows it.
    static func dispatchTime(_ instant: ContinuousClock.Instant) -> DispatchTime {
        let wait = min(instant - .now, .seconds(86_400))
        guard wait > .zero else { return .now() }
        let (seconds, attoseconds) = wait.components
        return .now() + .nanoseconds(Int(clamping: seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
    }

    func tick() {
        dispatchPrecondition(condition: .onQueue(queue))
        // Cleared first: a deadline someone sets while this runs is kept (see the end).
        state.withLock { $0.timerDue = nil }
        if stopped { return }
        observer?.timerFired()
        let machine = timerMachine
        let (all, redials) = state.withLock { (Array($0.sessions.values), $0.redials) }
        let actions = machine.tick(now: .now, sessions: all.sorted { $0.id < $1.id }.map(timerFacts), redials: redials,
                                   devicesWithSession: Set(all.map(\.deviceKey)))
        for action in actions {
            switch action {
            case let .expireInvitation(id):
                guard let session = state.withLock({ $0.sessions[id] }) else { continue }
                session.invitationDeadline = nil
                session.closeReason = "invitation expired"
                emit(.invitationClosed(.init(peer: session.peer, invitation: session.invitationID, outcome: "expired", time: now())))
                perform(session.machine.handle(.invitationExpired), on: session)
            case let .close(id, reason):
                guard let session = state.withLock({ $0.sessions[id] }) else { continue }
                session.closeReason = session.closeReason ?? reason
                perform(session.machine.handle(.transportClosed(reason)), on: session)
                session.channel.close()
            case let .ping(id):
                if let session = state.withLock({ $0.sessions[id] }) { session.send([.ping(session.pingSent())]) }
            case let .dropRedial(device):
                state.withLock { $0.redials[device] = nil }
            case let .redial(device, attempt, next):
                state.withLock { $0.redials[device] = next }
                // Direct first (at addresses discovery servers gave too); every other attempt
                // goes through a relay, when there is one.
                if attempt % 2 == 0 { startLookup(device: device) }
                if attempt % 2 == 1, startRelayDial(device: device) { continue }
                let address = redialAddress(for: device, attempt: attempt, fallback: next.address)
                if address.isEmpty { continue }  // no address known yet: relays and lookups only
                startDial(address: address, expected: device, context: nil, progress: nil, completion: nil)
            }
        }
        tryDirectPaths()
        measureRoundTrips()
        if let due = nextDeadline() { wakeTimer(at: due) }
    }

    var timerMachine: TimerMachine {
        TimerMachine(deadPeerTimeout: config.deadPeerTimeout, keepaliveInterval: config.keepaliveInterval,
                     redialMaximum: config.redialMaximum)
    }

    /// What the timer needs to know of `session`.
    func timerFacts(_ session: Session) -> TimerMachine.SessionFacts {
        // A peer that does not read what we send: the reader stopped reading it (its
        // silence is then ours), or a write failed or timed out.
        TimerMachine.SessionFacts(id: session.id, awaitingDecision: session.machine.state == .awaitingLocalDecision,
                                  invitationDeadline: session.invitationDeadline,
                                  stall: session.flow.stallReason(pausedFor: config.deadPeerTimeout),
                                  lastReceived: session.lastReceived, lastSent: session.lastSent,
                                  flowPaused: session.flow.isPaused,
                                  stallDue: session.flow.stallDue(pausedFor: config.deadPeerTimeout))
    }

    /// The earliest deadline of the sessions and redials as they are now (after a tick's
    /// actions), the direct paths and round trips of ConnectionService+Paths included; nil
    /// when nothing will be due (no session, no redial).
    func nextDeadline() -> ContinuousClock.Instant? {
        dispatchPrecondition(condition: .onQueue(queue))
        let (all, redials) = state.withLock { (Array($0.sessions.values), $0.redials) }
        var due = timerMachine.nextDeadline(sessions: all.map(timerFacts), redials: redials)
        for session in all where session.machine.state == .connected {
            var times = [(session.lastPingSent ?? .now) + roundTripInterval]
            if session.relayHost != nil, let next = session.nextDirectTry { times.append(next) }
            for time in times { due = min(due ?? time, time) }
        }
        return due
    }
}
