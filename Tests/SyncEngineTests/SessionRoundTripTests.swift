import Foundation
@testable import SyncEngine
import Testing

/// What `peers` shows of a live session once its first ping is answered: the path and the
/// round trip. The pong arrives as any frame does (`Session.received`: the frame's time,
/// the pong's round trip and the machine's step under one lock).
@Suite(.serialized)
struct SessionRoundTripTests {
    typealias Peer = ConnectionServiceTests.Peer

    @Test func peersShowsThePathAndRoundTripOfAConnectedPeer() throws {
        let bob = try Peer("bob") { $0.autoAccept = true }
        let alice = try Peer("alice")
        defer { alice.service.stop(); bob.service.stop() }
        _ = alice.invite(bob)
        func bobAsAliceSeesHim() -> PeerSummary? { (try? alice.service.peerList())?.first { $0.peer.name == "bob" } }
        try ConnectionServiceTests().eventually("alice measured her round trip to bob") { bobAsAliceSeesHim()?.roundTripMs != nil }
        let bobEntry = try #require(bobAsAliceSeesHim())
        #expect(bobEntry.path?.hasPrefix("direct 127.0.0.1:") == true)
        #expect(try #require(bobEntry.roundTripMs) >= 0)
    }
}
