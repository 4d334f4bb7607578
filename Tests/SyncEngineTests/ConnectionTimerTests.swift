import Foundation
@testable import SyncEngine
import Testing

/// The connections' timer sleeps until its next deadline (ConnectionService+Timer): an idle
/// session wakes it for its keepalive, not 4 times a second, and no deadline is missed.
@Suite(.serialized) struct ConnectionTimerTests {
    /// Over 3 s of an idle session with the default keepalive (2 s), the timer fired at most a
    /// few times (its keepalive, the round trip's ping, an answer); a 250 ms beat fired 12.
    @Test func anIdleSessionWakesTheTimerOnlyWhenSomethingIsDue() throws {
        let bob = try ConnectionServiceTests.Peer("bob") { $0.autoAccept = true; $0.keepaliveInterval = .seconds(2) }
        let alice = try ConnectionServiceTests.Peer("alice") { $0.keepaliveInterval = .seconds(2) }
        defer { alice.service.stop(); bob.service.stop() }
        let paired = alice.invite(bob)
        try TransferPair.eventually("paired") { paired.value != nil && bob.observer.stillConnected.count == 1 }
        Thread.sleep(forTimeInterval: 0.5)
        let before = alice.observer.timerBeats
        Thread.sleep(forTimeInterval: 3)
        let beats = alice.observer.timerBeats - before
        #expect(beats <= 5, "\(beats) wakeups in 3 s")
        #expect(alice.observer.stillConnected.count == 1, "the keepalive kept it")
    }

    /// A peer that stops answering (its node's queue frozen: no pong, no frame) is still
    /// dropped at the dead-peer time, though the timer sleeps between deadlines.
    @Test func aPeerThatStopsAnsweringIsStillDropped() throws {
        let bob = try ConnectionServiceTests.Peer("bob") { $0.autoAccept = true }
        let alice = try ConnectionServiceTests.Peer("alice") { $0.deadPeerTimeout = .seconds(1) }
        defer { alice.service.stop(); bob.service.stop() }
        let paired = alice.invite(bob)
        try TransferPair.eventually("paired") { paired.value != nil && bob.observer.stillConnected.count == 1 }
        bob.queue.suspend()
        defer { bob.queue.resume() }
        try TransferPair.eventually("alice drops bob") { alice.observer.stillConnected.isEmpty }
        #expect(alice.observer.ended.last?.contains("no answer for 1.0 seconds") == true, "\(alice.observer.ended)")
    }
}
