import Testing
@testable import SyncEngine

/// The node's timers as a table: facts at a given time → actions. Times are offsets from
/// one fixed instant; nothing waits.
struct TimerMachineTests {
    typealias Facts = TimerMachine.SessionFacts
    typealias A = TimerMachine.Action

    static let t0 = ContinuousClock.now
    static let machine = TimerMachine(deadPeerTimeout: .seconds(7), keepaliveInterval: .seconds(2), redialMaximum: .seconds(60))

    static func at(_ seconds: Double) -> ContinuousClock.Instant { t0 + .milliseconds(Int(seconds * 1000)) }

    static func session(_ id: UInt64, received: Double = 0, sent: Double = 0, awaiting: Bool = false,
                        deadline: Double? = nil, stall: String? = nil, paused: Bool = false) -> Facts {
        Facts(id: id, awaitingDecision: awaiting, invitationDeadline: deadline.map(at), stall: stall,
              lastReceived: at(received), lastSent: at(sent), flowPaused: paused)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let now: Double
        let sessions: [Facts]
        let actions: [A]
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "quiet for less than the keepalive: nothing", now: 1.9, sessions: [session(1)], actions: []),
        Row(name: "nothing sent for the keepalive interval: ping", now: 2, sessions: [session(1, received: 1.5)],
            actions: [.ping(session: 1)]),
        Row(name: "silent peer past the dead-peer time: closed", now: 7.1, sessions: [session(1, sent: 7)],
            actions: [.close(session: 1, reason: "no answer for 7.0 seconds (peer gone)")]),
        Row(name: "silent because we stopped reading it: kept, pinged", now: 8, sessions: [session(1, paused: true)],
            actions: [.ping(session: 1)]),
        Row(name: "a peer that stopped reading: closed with the flow's reason", now: 1,
            sessions: [session(1, stall: "the peer stopped reading what we send")],
            actions: [.close(session: 1, reason: "the peer stopped reading what we send")]),
        Row(name: "an invitation past its deadline expires (nothing else for it)", now: 30,
            sessions: [session(1, awaiting: true, deadline: 30)], actions: [.expireInvitation(session: 1)]),
        Row(name: "an invitation before its deadline: only the keepalive", now: 29.9,
            sessions: [session(1, received: 29, awaiting: true, deadline: 30)], actions: [.ping(session: 1)]),
        Row(name: "a deadline without an open invitation does not expire", now: 31,
            sessions: [session(1, received: 30, sent: 30, deadline: 30)], actions: []),
        Row(name: "each session on its own", now: 8,
            sessions: [session(1, received: 7, sent: 7), session(2, received: 0.5, sent: 7.5), session(3, received: 7, sent: 5)],
            actions: [.close(session: 2, reason: "no answer for 7.0 seconds (peer gone)"), .ping(session: 3)]),
    ]

    @Test(arguments: rows)
    func sessions(_ row: Row) {
        #expect(Self.machine.tick(now: Self.at(row.now), sessions: row.sessions, redials: [:], devicesWithSession: []) == row.actions)
    }

    @Test func aDueRedialDialsAndDoublesItsDelayUpToTheMaximum() {
        var plan = TimerMachine.Redial(address: "10.0.0.2:41414", nextAttempt: Self.at(0), delay: .seconds(1))
        var delays: [Duration] = []
        var attempts: [Int] = []
        var now = Self.at(0)
        for _ in 0..<8 {
            let actions = Self.machine.tick(now: now, sessions: [], redials: ["D": plan], devicesWithSession: [])
            guard case let .redial("D", attempt, next)? = actions.first, actions.count == 1 else {
                Issue.record("expected one redial, got \(actions)")
                return
            }
            attempts.append(attempt)
            delays.append(next.delay)
            #expect(next.nextAttempt == now + next.delay)
            #expect(Self.machine.tick(now: next.nextAttempt - .milliseconds(1), sessions: [], redials: ["D": next],
                                      devicesWithSession: []).isEmpty, "not before its time")
            plan = next
            now = next.nextAttempt
        }
        #expect(attempts == Array(0..<8))
        #expect(delays == [2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
    }

    /// The timer sleeps until the earliest of these; whatever `tick` does at that time, it
    /// does no sooner (checked against `tick` just before the deadline).
    static let deadlines: [(name: String, sessions: [Facts], redials: [String: TimerMachine.Redial], due: Double?)] = [
        ("nothing: no deadline", [], [:], nil),
        ("an idle session: its keepalive", [session(1)], [:], 2),
        ("a silent peer we keep pinging: the dead-peer time", [session(1, sent: 6)], [:], 7),
        ("silent because we stopped reading it: not dead, the keepalive", [session(1, sent: 6, paused: true)], [:], 8),
        ("an open invitation: its expiry", [session(1, sent: 0.5, awaiting: true, deadline: 1)], [:], 1),
        ("a peer not reading what we send: when that is a stall",
         [Facts(id: 1, awaitingDecision: false, invitationDeadline: nil, stall: nil, lastReceived: at(1), lastSent: at(1),
                flowPaused: true, stallDue: at(1.5))], [:], 1.5),
        ("a redial", [session(1, received: 1, sent: 1)],
         ["D": TimerMachine.Redial(address: "a:1", nextAttempt: at(0.5), delay: .seconds(1))], 0.5),
    ]

    @Test func theNextDeadlineIsTheEarliestThingDue() {
        for row in Self.deadlines {
            let due = Self.machine.nextDeadline(sessions: row.sessions, redials: row.redials)
            #expect(due == row.due.map(Self.at), "\(row.name)")
            guard let due, row.sessions.allSatisfy({ $0.stallDue == nil }) else { continue }
            let before = Self.machine.tick(now: due - .milliseconds(1), sessions: row.sessions, redials: row.redials, devicesWithSession: [])
            let at = Self.machine.tick(now: due, sessions: row.sessions, redials: row.redials, devicesWithSession: [])
            #expect(before.isEmpty && !at.isEmpty, "\(row.name): \(before) then \(at)")
        }
    }

    @Test func aRedialOfADeviceWithASessionIsDropped() {
        let plan = TimerMachine.Redial(address: "a:1", nextAttempt: Self.at(0), delay: .seconds(1))
        let later = TimerMachine.Redial(address: "b:1", nextAttempt: Self.at(5), delay: .seconds(1))
        let actions = Self.machine.tick(now: Self.at(1), sessions: [], redials: ["D": plan, "E": later], devicesWithSession: ["D", "E"])
        #expect(actions == [.dropRedial(device: "D")], "E is not due yet: left alone")
    }
}
