import Testing
import PeerWire
@testable import SyncEngine

/// Event → action tables for the session state machine.
struct SessionMachineTests {
    typealias E = SessionMachine.Event
    typealias A = SessionMachine.Action

    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let role: SessionMachine.Role
        let events: [E]
        /// Actions of the last event.
        let actions: [A]
        let state: SessionMachine.State
        var testDescription: String { name }
    }

    static let tid = TransferID.random()

    static let rows: [Row] = [
        Row(name: "responder, paired peer: accepted at once", role: .responder,
            events: [.handshakeCompleted(.paired)],
            actions: [.send(.pairing(.accepted)), .state(.connected)], state: .connected),
        Row(name: "responder, unknown peer: invitation", role: .responder,
            events: [.handshakeCompleted(.unknown)],
            actions: [.send(.pairing(.pending)), .raiseInvitation, .state(.awaitingLocalDecision)], state: .awaitingLocalDecision),
        Row(name: "responder, impersonation: refused", role: .responder,
            events: [.handshakeCompleted(.impersonation("new key for 'bob'"))],
            actions: [.refused("refused: possible impersonation: new key for 'bob'"),
                      .send(.close(code: .impersonation, reason: "refused: possible impersonation")),
                      .state(.closed), .closeTransport], state: .closed),
        Row(name: "responder, who is paired cannot be read: refused with the cause, no invitation", role: .responder,
            events: [.handshakeCompleted(.unreadable("no such table: peers"))],
            actions: [.refused("refused: the paired peers cannot be read here: no such table: peers"),
                      .send(.close(code: .tryLater, reason: "the peer cannot read its paired peers now; try again later")),
                      .state(.closed), .closeTransport], state: .closed),
        Row(name: "responder accepts: pin, tell, connect", role: .responder,
            events: [.handshakeCompleted(.unknown), .localAccept],
            actions: [.pinPeer, .send(.pairing(.accepted)), .state(.connected)], state: .connected),
        Row(name: "responder declines: no pin", role: .responder,
            events: [.handshakeCompleted(.unknown), .localDecline],
            actions: [.send(.pairing(.declined)), .send(.close(code: .notPaired, reason: "invitation declined")),
                      .state(.closed), .closeTransport], state: .closed),
        Row(name: "invitation expires: no pin", role: .responder,
            events: [.handshakeCompleted(.unknown), .invitationExpired],
            actions: [.send(.pairing(.expired)), .send(.close(code: .timeout, reason: "invitation expired")),
                      .state(.closed), .closeTransport], state: .closed),
        Row(name: "message before acceptance is dropped", role: .responder,
            events: [.handshakeCompleted(.unknown), .frame(.message(id: 1, body: [1]))],
            actions: [.dropped(.message)], state: .awaitingLocalDecision),
        Row(name: "stream data before acceptance is dropped", role: .responder,
            events: [.handshakeCompleted(.unknown), .frame(.streamData(id: 1, bytes: [1]))],
            actions: [.dropped(.streamData)], state: .awaitingLocalDecision),
        Row(name: "stream credit before acceptance is dropped", role: .responder,
            events: [.handshakeCompleted(.unknown), .frame(.streamCredit(id: 1, bytes: 9))],
            actions: [.dropped(.streamCredit)], state: .awaitingLocalDecision),
        Row(name: "connected: stream frames go to the session's streams", role: .responder,
            events: [.handshakeCompleted(.paired), .frame(.streamData(id: 1, bytes: [1]))],
            actions: [.stream(.streamData(id: 1, bytes: [1]))], state: .connected),
        Row(name: "connected: a stream reset goes to the session's streams", role: .initiator,
            events: [.handshakeCompleted(.paired), .frame(.pairing(.accepted)), .frame(.streamReset(id: 2, reason: "x"))],
            actions: [.stream(.streamReset(id: 2, reason: "x"))], state: .connected),
        Row(name: "ping answered even while pending", role: .responder,
            events: [.handshakeCompleted(.unknown), .frame(.ping(7))],
            actions: [.send(.pong(7))], state: .awaitingLocalDecision),
        Row(name: "accept after expiry does nothing", role: .responder,
            events: [.handshakeCompleted(.unknown), .invitationExpired, .localAccept],
            actions: [], state: .closed),
        Row(name: "connected responder delivers messages", role: .responder,
            events: [.handshakeCompleted(.paired), .frame(.message(id: 9, body: [104, 105]))],
            actions: [.deliverMessage(id: 9, body: [104, 105])], state: .connected),
        Row(name: "a responder ignores pairing frames from the initiator", role: .responder,
            events: [.handshakeCompleted(.unknown), .frame(.pairing(.accepted))],
            actions: [], state: .awaitingLocalDecision),
        Row(name: "initiator waits", role: .initiator,
            events: [.handshakeCompleted(.unknown)],
            actions: [.state(.awaitingPeerDecision)], state: .awaitingPeerDecision),
        Row(name: "initiator sees pending", role: .initiator,
            events: [.handshakeCompleted(.unknown), .frame(.pairing(.pending))],
            actions: [.invitationPending], state: .awaitingPeerDecision),
        Row(name: "initiator accepted: pin, connect", role: .initiator,
            events: [.handshakeCompleted(.unknown), .frame(.pairing(.pending)), .frame(.pairing(.accepted))],
            actions: [.pinPeer, .state(.connected)], state: .connected),
        Row(name: "initiator declined: closed without trust", role: .initiator,
            events: [.handshakeCompleted(.unknown), .frame(.pairing(.declined))],
            actions: [.pairingRejected(.declined), .state(.closed), .closeTransport], state: .closed),
        Row(name: "initiator: message before acceptance dropped", role: .initiator,
            events: [.handshakeCompleted(.paired), .frame(.message(id: 1, body: []))],
            actions: [.dropped(.message)], state: .awaitingPeerDecision),
        Row(name: "initiator refuses an impostor", role: .initiator,
            events: [.handshakeCompleted(.impersonation("expected X"))],
            actions: [.refused("refused: possible impersonation: expected X"),
                      .send(.close(code: .impersonation, reason: "refused: possible impersonation")),
                      .state(.closed), .closeTransport], state: .closed),
        Row(name: "peer close ends the session", role: .initiator,
            events: [.handshakeCompleted(.paired), .frame(.pairing(.accepted)), .frame(.close(code: .normal, reason: "bye"))],
            actions: [.ended("peer closed the session: bye"), .peerClosed(.normal), .state(.closed), .closeTransport], state: .closed),
        Row(name: "shutdown tells the peer it may come back", role: .responder,
            events: [.handshakeCompleted(.paired), .localShutdown],
            actions: [.send(.close(code: .shuttingDown, reason: "the node is shutting down")), .state(.closed), .closeTransport], state: .closed),
        Row(name: "local disconnect tells the peer", role: .initiator,
            events: [.handshakeCompleted(.paired), .frame(.pairing(.accepted)), .localDisconnect],
            actions: [.send(.close(code: .normal, reason: "disconnected by the user")), .state(.closed), .closeTransport], state: .closed),
        Row(name: "unpair tells the peer with its own code", role: .initiator,
            events: [.handshakeCompleted(.paired), .frame(.pairing(.accepted)), .localUnpair],
            actions: [.send(.close(code: .unpaired, reason: "unpaired by the user")), .state(.closed), .closeTransport], state: .closed),
        Row(name: "a peer's unpair is reported with its code", role: .responder,
            events: [.handshakeCompleted(.paired), .frame(.close(code: .unpaired, reason: "unpaired by the user"))],
            actions: [.ended("peer closed the session: unpaired by the user"), .peerClosed(.unpaired), .state(.closed), .closeTransport],
            state: .closed),
        Row(name: "transport loss closes once", role: .responder,
            events: [.handshakeCompleted(.paired), .transportClosed("reset")],
            actions: [.ended("reset"), .state(.closed)], state: .closed),
        Row(name: "an offer before acceptance is dropped", role: .responder,
            events: [.handshakeCompleted(.unknown), .frame(.offer(TransferOffer(id: tid, kind: .file, name: "x", entries: [])))],
            actions: [.dropped(.offer)], state: .awaitingLocalDecision),
        Row(name: "a chunk before acceptance is dropped", role: .initiator,
            events: [.handshakeCompleted(.unknown), .frame(.chunk(id: tid, index: 0, data: [1]))],
            actions: [.dropped(.chunk)], state: .awaitingPeerDecision),
        Row(name: "connected: transfer frames go to the transfer manager", role: .responder,
            events: [.handshakeCompleted(.paired), .frame(.chunkAck(id: tid, index: 3, ok: true))],
            actions: [.transfer(.chunkAck(id: tid, index: 3, ok: true))], state: .connected),
        Row(name: "nothing happens after close", role: .responder,
            events: [.handshakeCompleted(.paired), .transportClosed("reset"), .frame(.message(id: 1, body: [1]))],
            actions: [], state: .closed),
    ]

    @Test(arguments: rows)
    func table(_ row: Row) {
        var machine = SessionMachine(role: row.role)
        var last: [A] = []
        for event in row.events { last = machine.handle(event) }
        #expect(last == row.actions)
        #expect(machine.state == row.state)
    }

    /// Whatever arrives, no message is delivered before the session is connected.
    @Test func noDeliveryBeforeConnectedUnderRandomEvents() {
        let events: [E] = [.frame(.message(id: 1, body: [1])), .frame(.ping(1)), .frame(.pairing(.pending)),
                           .frame(.streamOpen(id: 1, name: "x")), .frame(.pong(2)), .frame(.pairing(.refused))]
        var seed: UInt64 = 42
        for _ in 0..<2_000 {
            for role in [SessionMachine.Role.initiator, .responder] {
                var machine = SessionMachine(role: role)
                _ = machine.handle(.handshakeCompleted(.unknown))
                for _ in 0..<6 {
                    seed = seed &* 6364136223846793005 &+ 1442695040888963407
                    let event = events[Int(seed >> 33) % events.count]
                    let actions = machine.handle(event)
                    if machine.state != .connected {
                        #expect(!actions.contains { if case .deliverMessage = $0 { true } else { false } })
                        #expect(!actions.contains(.pinPeer))
                    }
                }
            }
        }
    }
}
