import Foundation
import PeerCrypto
import PeerNet
import Testing
@testable import SyncEngine

/// Events travel as JSON (control socket, `--json`): each kind reads back as written, with
/// its `event` name, and one flat object per event.
struct NodeEventCodingTests {
    static let peer = PeerRef(id: DeviceID(publicKey: KeyPair.generate().publicKey), name: "bob")

    static let samples: [NodeEvent] = [
        .listening(.init(address: "127.0.0.1:1", time: 1)),
        .state(.init(peer: peer, state: .connecting, address: "127.0.0.1:2", time: 2)),
        .invitation(.init(peer: peer, invitation: "K7Q2PX", code: "123456", context: "hi", address: "a:1", time: 3)),
        .invitationClosed(.init(peer: peer, invitation: "K7Q2PX", outcome: "expired", time: 4)),
        .invitationPending(.init(peer: peer, code: "123456", time: 5)),
        .paired(.init(peer: peer, code: "123456", time: 6)),
        .pairingRejected(.init(peer: peer, outcome: "declined", time: 7)),
        .message(.init(peer: peer, id: 9, text: "hello", time: 8)),
        .refused(.init(peer: peer, reason: "refused: possible impersonation", time: 9)),
        .dropped(.init(peer: peer, reason: "message frame dropped", time: 10)),
        .error(.init(peer: nil, reason: "cannot record", time: 11)),
        .offer(.init(peer: peer, transfer: "ab12", name: "a.txt", total: 10, files: 1, time: 12)),
        .shareOffer(.init(peer: peer, folder: "abcde-fghij", name: "docs", time: 13)),
        .folder(.init(folder: "abcde-fghij", name: "docs", state: .idle, path: "/d", time: 14)),
        .file(.init(folder: "abcde-fghij", name: "docs", path: "a/b.txt", state: .syncing, bytes: 10, total: 20, time: 14)),
        .file(.init(folder: "abcde-fghij", name: "docs", path: "a/b.txt", state: .failed, reason: "disk full; tried again in 30 s", time: 15)),
        .transfer(.init(transfer: "ab12", direction: .receive, peer: peer, name: "a.txt", state: .paused, bytes: 5, total: 10,
                        rate: 1.5, reason: "connection lost", time: 15)),
        .found(.init(peer: peer, instance: "bob (2)", address: "a:1", addresses: ["a:1"], port: 1, info: ["k": "v"], time: 16)),
        .lost(.init(peer: peer, instance: "bob (2)", time: 17)),
        .registered(.init(instance: "alice (2)", reason: "taken", time: 18)),
        .visibility(.init(state: "invisible", time: 19)),
    ]

    @Test(arguments: samples)
    func anEventReadsBackAsWritten(_ event: NodeEvent) throws {
        let json = event.json
        #expect(json["event"]?.stringValue == event.kind.rawValue)
        #expect(json["time"] != nil)
        #expect(try json.decode(as: NodeEvent.self) == event, "\(json.encodedLine())")
    }

    @Test func everyKindHasASample() {
        #expect(Set(Self.samples.map(\.kind)) == Set(NodeEvent.Kind.allCases))
    }

    @Test func anUnknownKindIsNotAnEvent() {
        #expect(throws: (any Error).self) { try JSONDecoder().decode(NodeEvent.self, from: Data(#"{"event":"nope","time":1}"#.utf8)) }
    }
}
