/// What the node's timer decides, as a pure function of the time and of each session's and
/// redial's timing facts: invitations that expire, peers that are gone or stopped reading,
/// keepalive pings, and redials that are due (with the next back-off); and when it is next
/// due (`nextDeadline`: the timer sleeps until then). Node gathers the facts, carries out
/// the actions, and owns no timing rule of its own.
struct TimerMachine {
    typealias Instant = ContinuousClock.Instant

    /// The timing facts of one session.
    struct SessionFacts: Sendable, Equatable {
        var id: UInt64
        /// The user has not answered its invitation yet.
        var awaitingDecision: Bool
        var invitationDeadline: Instant?
        /// Why the flow says the peer stopped reading (nil: it reads).
        var stall: String?
        var lastReceived: Instant
        var lastSent: Instant
        /// We stopped reading the peer ourselves (back-pressure): its silence is ours.
        var flowPaused: Bool
        /// When the flow will say the peer stopped reading, if it goes on (nil: it reads).
        var stallDue: Instant? = nil
    }

    /// A planned redial of a paired device.
    struct Redial: Sendable, Equatable {
        var address: String
        var nextAttempt: Instant
        var delay: Duration
        /// Attempts so far (the address rotates among the known ones).
        var attempts = 0
    }

    enum Action: Sendable, Equatable {
        /// The invitation was not answered in time.
        case expireInvitation(session: UInt64)
        /// The session is dead (silent peer, or one that stopped reading): close it.
        case close(session: UInt64, reason: String)
        /// Nothing was sent for the keepalive interval.
        case ping(session: UInt64)
        /// The device has a session (live or starting): its redial is dropped.
        case dropRedial(device: String)
        /// Dial the device now (attempt `attempt`); `next` is its following plan.
        case redial(device: String, attempt: Int, next: Redial)
    }

    var deadPeerTimeout: Duration
    var keepaliveInterval: Duration
    var redialMaximum: Duration

    /// The actions due at `now`, sessions first (in the order given), then redials.
    func tick(now: Instant, sessions: [SessionFacts], redials: [String: Redial], devicesWithSession: Set<String>) -> [Action] {
        var actions: [Action] = []
        for session in sessions {
            if session.awaitingDecision, let deadline = session.invitationDeadline, now >= deadline {
                actions.append(.expireInvitation(session: session.id))
                continue
            }
            if let stall = session.stall {
                actions.append(.close(session: session.id, reason: stall))
                continue
            }
            if now - session.lastReceived >= deadPeerTimeout, !session.flowPaused {
                actions.append(.close(session: session.id, reason: "no answer for \(deadPeerTimeout) (peer gone)"))
                continue
            }
            if now - session.lastSent >= keepaliveInterval {
                actions.append(.ping(session: session.id))
            }
        }
        for (device, redial) in redials.sorted(by: { $0.key < $1.key }) where now >= redial.nextAttempt {
            if devicesWithSession.contains(device) {
                actions.append(.dropRedial(device: device))
                continue
            }
            var next = redial
            next.delay = min(redial.delay * 2, redialMaximum)
            next.nextAttempt = now + next.delay
            next.attempts += 1
            actions.append(.redial(device: device, attempt: redial.attempts, next: next))
        }
        return actions
    }

    /// The earliest time at which `tick` will have something to do for these sessions and
    /// redials if nothing else happens meanwhile (nil: never). Each session has one at most
    /// `keepaliveInterval` after its last frame sent.
    func nextDeadline(sessions: [SessionFacts], redials: [String: Redial]) -> Instant? {
        var times = redials.values.map(\.nextAttempt)
        for session in sessions {
            if session.awaitingDecision, let deadline = session.invitationDeadline { times.append(deadline) }
            if let stall = session.stallDue { times.append(stall) }
            if !session.flowPaused { times.append(session.lastReceived + deadPeerTimeout) }
            times.append(session.lastSent + keepaliveInterval)
        }
        return times.min()
    }
}
