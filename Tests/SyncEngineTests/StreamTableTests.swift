import Testing
import PeerWire
@testable import SyncEngine

/// The session's streams as a pure machine: credit-based flow control, and every field a
/// hostile peer controls (IDs, counts, sizes, credit) bounded.
struct StreamTableTests {
    typealias A = StreamTable.Action
    static let window = StreamTable.window

    /// A responder's table (the peer, the initiator, opens odd IDs).
    func responder() -> StreamTable { StreamTable(isInitiator: false) }

    @Test func aPeersStreamIsGrantedOneWindowAndDeliversInOrder() {
        var table = responder()
        #expect(table.received(.streamOpen(id: 1, name: "notes.tar")) ==
                [.opened(id: 1, name: "notes.tar"), .send(.streamCredit(id: 1, bytes: UInt32(Self.window)))])
        #expect(table.received(.streamData(id: 1, bytes: [1, 2])) == [.data(id: 1, bytes: [1, 2])])
        #expect(table.received(.streamData(id: 1, bytes: [3])) == [.data(id: 1, bytes: [3])])
        #expect(table.received(.streamClose(id: 1)) == [.finished(id: 1)])
        #expect(table.openIncomingCount == 0)
    }

    @Test func dataBeyondTheCreditGrantedEndsTheSession() {
        var table = responder()
        _ = table.received(.streamOpen(id: 1, name: "s"))
        let full = [UInt8](repeating: 0, count: 65_536)
        for _ in 0..<(Self.window / full.count) {
            #expect(table.received(.streamData(id: 1, bytes: full)) == [.data(id: 1, bytes: full)])
        }
        // The window is used up and the consumer took nothing: one more byte is a violation.
        guard case .violation = table.received(.streamData(id: 1, bytes: [0])).first else {
            Issue.record("a byte beyond the credit was accepted")
            return
        }
    }

    @Test func whatTheConsumerTakesIsGrantedAgainInBatches() {
        var table = responder()
        _ = table.received(.streamOpen(id: 1, name: "s"))
        let piece = [UInt8](repeating: 7, count: 65_536)
        _ = table.received(.streamData(id: 1, bytes: piece))
        // Below the threshold nothing is granted (no frame per read).
        #expect(table.consumed(65_536, of: 1) == [])
        var granted = 0
        for _ in 0..<(StreamTable.grantThreshold / 65_536) {
            for case let .send(.streamCredit(1, bytes)) in table.consumed(65_536, of: 1) { granted += Int(bytes) }
        }
        #expect(granted >= StreamTable.grantThreshold)
        // With that credit back, the writer may send past the first window.
        for _ in 0..<(Self.window / piece.count) - 1 {
            #expect(table.received(.streamData(id: 1, bytes: piece)) == [.data(id: 1, bytes: piece)])
        }
        #expect(table.received(.streamData(id: 1, bytes: piece)) == [.data(id: 1, bytes: piece)])
    }

    @Test func streamsBeyondTheBoundAreResetNotStored() {
        var table = responder()
        for i in 0..<StreamTable.maxIncoming {
            let id = UInt32(2 * i + 1)
            #expect(table.received(.streamOpen(id: id, name: "s\(i)")).first == .opened(id: id, name: "s\(i)"))
        }
        let extra = UInt32(2 * StreamTable.maxIncoming + 1)
        #expect(table.received(.streamOpen(id: extra, name: "one too many")) ==
                [.send(.streamReset(id: extra, reason: "too many streams (at most \(StreamTable.maxIncoming) at once)"))])
        #expect(table.openIncomingCount == StreamTable.maxIncoming)
        // Its data is ignored, not buffered.
        #expect(table.received(.streamData(id: extra, bytes: [1])) == [])
    }

    @Test(arguments: [
        ("opened with one of our IDs", Frame.streamOpen(id: 2, name: "x")),
        ("data for our own stream", Frame.streamData(id: 4, bytes: [1])),
        ("close of our own stream", Frame.streamClose(id: 6)),
        ("credit for the peer's own stream", Frame.streamCredit(id: 1, bytes: 1)),
    ])
    func framesWithTheWrongSidesIDAreViolations(_ name: String, _ frame: Frame) {
        var table = responder()
        guard case .violation = table.received(frame).first else {
            Issue.record("\(name) was accepted")
            return
        }
    }

    @Test func aStreamOpenedTwiceIsAViolation() {
        var table = responder()
        _ = table.received(.streamOpen(id: 1, name: "a"))
        guard case .violation = table.received(.streamOpen(id: 1, name: "b")).first else {
            Issue.record("a second open of stream 1 was accepted")
            return
        }
    }

    @Test func creditBeyondTheBoundIsAViolation() {
        var table = StreamTable(isInitiator: true)
        let (id, actions) = table.open(name: "out")!
        #expect(id == 1 && actions == [.send(.streamOpen(id: 1, name: "out"))])
        #expect(table.received(.streamCredit(id: 1, bytes: UInt32(StreamTable.maxCredit))) == [.credit(id: 1, bytes: StreamTable.maxCredit)])
        guard case .violation = table.received(.streamCredit(id: 1, bytes: 1)).first else {
            Issue.record("credit beyond the bound was accepted")
            return
        }
    }

    @Test func aWriterSendsOnlyWhatWasGranted() {
        var table = StreamTable(isInitiator: true)
        let (id, _) = table.open(name: "out")!
        #expect(table.take(credit: 65_536, for: id) == 0)
        _ = table.received(.streamCredit(id: id, bytes: 100))
        #expect(table.take(credit: 65_536, for: id) == 100)
        #expect(table.take(credit: 65_536, for: id) == 0)
        #expect(table.finish(id) == [.send(.streamClose(id: id))])
        // Finished: no more credit, and a late grant is ignored.
        #expect(table.received(.streamCredit(id: id, bytes: 100)) == [])
        #expect(table.take(credit: 1, for: id) == 0)
    }

    @Test func aResetOrTheSessionsEndCutsNeverCompletes() {
        var table = responder()
        _ = table.received(.streamOpen(id: 1, name: "a"))
        _ = table.received(.streamOpen(id: 3, name: "b"))
        let (mine, _) = table.open(name: "c")!
        #expect(table.received(.streamReset(id: 1, reason: "disk full")) == [.cut(id: 1, reason: "the peer cut the stream: disk full")])
        // A reset crossing a close we already saw, or for an unknown stream, is ignored.
        #expect(table.received(.streamReset(id: 1, reason: "again")) == [])
        #expect(table.received(.streamClose(id: 1)) == [])
        #expect(table.sessionEnded("gone") == [.cut(id: mine, reason: "gone"), .cut(id: 3, reason: "gone")])
        #expect(table.openIncomingCount == 0 && table.openOutgoingCount == 0)
    }

    @Test func outgoingStreamsAreBoundedAndUseOurParity() {
        var table = responder()
        var ids: [UInt32] = []
        for i in 0..<StreamTable.maxOutgoing { ids.append(table.open(name: "s\(i)")!.id) }
        #expect(ids.allSatisfy { $0 % 2 == 0 })
        #expect(Set(ids).count == ids.count)
        #expect(table.open(name: "one too many") == nil)
        _ = table.reset(ids[0], reason: "stop")
        #expect(table.open(name: "again") != nil)
    }
}
