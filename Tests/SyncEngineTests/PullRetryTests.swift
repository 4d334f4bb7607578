import PeerFiles
import Testing
@testable import SyncEngine

/// The retry decisions of failed pulls, as tables: no clock, no disk, no network.
struct PullRetryTests {
    @Test(arguments: [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 16.0), (6, 32.0), (7, 60.0), (8, 60.0), (50, 60.0)])
    func backOffDoublesFromOneSecondToTheCap(attempts: Int, seconds: Double) {
        #expect(PullRetry.delay(afterAttempts: attempts) == seconds)
    }

    /// One row per failure kind: is it retried by the clock, and which event retries it at once.
    @Test(arguments: [
        (PullRetry.Failure.peerUnavailable, true, PullRetry.Wake.peerConnected),
        (.badData, true, .peerConnected),
        (.diskFull, true, .spaceFreed),
        (.unwritable, false, .versionChanged),
    ])
    func eachFailureHasItsRule(failure: PullRetry.Failure, timed: Bool, wake: PullRetry.Wake) {
        let rule = PullRetry.rule(failure)
        #expect(rule.timed == timed)
        #expect(rule.wake == wake)
    }

    /// What is due at `time` after `failure` at t = 100, with events between.
    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let failure: PullRetry.Failure
        /// Steps after the failure: (time, event); nil event: just look at what is due.
        let events: [(Double, Event?)]
        let dueAt: Double?
        var testDescription: String { name }
    }

    enum Event: Sendable { case peerConnected, space(UInt64) }

    static let rows: [Row] = [
        Row(name: "a cut link is retried after 1 s", failure: .peerUnavailable, events: [(100.5, nil), (101, nil)], dueAt: 101),
        Row(name: "a cut link is retried at once when a peer connects", failure: .peerUnavailable,
            events: [(100.2, .peerConnected)], dueAt: 100.2),
        Row(name: "a lying peer is retried after 1 s", failure: .badData, events: [(101, nil)], dueAt: 101),
        Row(name: "a lying peer is retried when another connects", failure: .badData, events: [(100.1, .peerConnected)], dueAt: 100.1),
        Row(name: "a full disk is retried by the clock only after 10 min", failure: .diskFull,
            events: [(101, nil), (160, nil), (699, nil), (700, nil)], dueAt: 700),
        Row(name: "a full disk is not retried when a peer connects", failure: .diskFull, events: [(100.3, .peerConnected)], dueAt: nil),
        Row(name: "a full disk with no more space stays waiting", failure: .diskFull, events: [(102, .space(10))], dueAt: nil),
        Row(name: "a full disk is retried once space is freed", failure: .diskFull, events: [(102, .space(10)), (104, .space(5000))], dueAt: 104),
        Row(name: "an unwritable name is not retried by the clock", failure: .unwritable, events: [(99999, nil)], dueAt: nil),
        Row(name: "an unwritable name is not retried when a peer connects", failure: .unwritable, events: [(100.1, .peerConnected)], dueAt: nil),
    ]

    @Test(arguments: rows)
    func whenAFailedPathIsDue(row: Row) {
        var retry = PullRetry()
        retry.failed("a.bin", row.failure, reason: "why", version: "v1", now: 100, freeBytes: 10)
        var due: Double?
        for (time, event) in row.events {
            switch event {
            case .peerConnected?: retry.peerConnected(now: time)
            case let .space(free)?:
                #expect(retry.probeDue(now: time), "a probe is due at \(time)")
                retry.spaceChecked(freeBytes: free, now: time)
            case nil: break
            }
            if due == nil, !retry.takeDue(now: time).isEmpty { due = time }
        }
        #expect(due == row.dueAt)
    }

    @Test func theBackOffGrowsWithEachFailureOfTheSameVersionAndStartsOverForANewOne() {
        var retry = PullRetry()
        var now = 0.0
        var waits: [Double] = []
        for _ in 0..<8 {
            retry.failed("a", .peerUnavailable, reason: "gone", version: "v1", now: now)
            let next = retry.nextDeadline!
            waits.append(next - now)
            now = next
            #expect(retry.takeDue(now: now) == ["a"])
            #expect(retry.nextDeadline == nil, "an attempt is running: nothing is timed")
        }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60])
        retry.failed("a", .peerUnavailable, reason: "gone", version: "v2", now: now)
        #expect(retry.nextDeadline == now + 1)
    }

    @Test func aFailureIsReportedOncePerChange() {
        var retry = PullRetry()
        let steps: [(PullRetry.Failure, String, String, Bool, String)] = [
            (.unwritable, "File name too long", "v1", true, "the first failure"),
            (.unwritable, "File name too long", "v1", false, "the same again"),
            (.unwritable, "File name too long", "v1", false, "at a rescan"),
            (.unwritable, "File name too long", "v2", true, "a new version"),
            (.diskFull, "No space left on device", "v2", true, "a new cause"),
            (.diskFull, "No space left on device", "v2", false, "the same cause again"),
        ]
        for (n, (failure, reason, version, reported, what)) in steps.enumerated() {
            let news = retry.failed("a", failure, reason: reason, version: version, now: Double(n))
            #expect(news == reported, "\(what)")
        }
        let wasFailing = retry.succeeded("a")
        #expect(wasFailing)
        let news = retry.failed("a", .diskFull, reason: "No space left on device", version: "v2", now: 10)
        #expect(news, "failing again after a success")
    }

    @Test func successForgetsThePathAndTheSpaceProbe() {
        var retry = PullRetry()
        retry.failed("a", .diskFull, reason: "full", version: "v1", now: 0, freeBytes: 0)
        retry.failed("b", .peerUnavailable, reason: "gone", version: "v1", now: 0)
        #expect(retry.nextDeadline == 1)
        retry.succeeded("b")
        #expect(retry.nextDeadline == PullRetry.spaceProbeInterval, "only the probe is left")
        retry.succeeded("a")
        #expect(retry.nextDeadline == nil && retry.isEmpty)
        let wasFailing = retry.succeeded("a")
        #expect(!wasFailing)
    }

    @Test func onlyThePathsWaitingForAPeerWakeWhenOneConnects() {
        var retry = PullRetry()
        retry.failed("cut", .peerUnavailable, reason: "gone", version: "v", now: 0)
        retry.failed("lie", .badData, reason: "bad", version: "v", now: 0)
        retry.failed("full", .diskFull, reason: "full", version: "v", now: 0, freeBytes: 0)
        retry.failed("name", .unwritable, reason: "too long", version: "v", now: 0)
        retry.peerConnected(now: 0.5)
        #expect(retry.takeDue(now: 0.5) == ["cut", "lie"])
        retry.spaceChecked(freeBytes: 1, now: 2)
        #expect(retry.takeDue(now: 2) == ["full"])
        #expect(retry.takeDue(now: 1e9).isEmpty, "the unwritable name waits for a change")
        #expect(retry.waitsForSpace("full") == false, "an attempt is running")
        retry.failed("full", .diskFull, reason: "full", version: "v", now: 3)
        #expect(retry.waitsForSpace("full") && !retry.waitsForSpace("cut"))
    }
}
