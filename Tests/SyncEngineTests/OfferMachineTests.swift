import PeerWire
import Testing
@testable import SyncEngine

/// The offer→accept phase as one table: every role × state (`nil`: no transfer of the ID
/// runs here) × event, with the steps taken. A pair the table does not list does nothing;
/// the test says so for each of them too.
struct OfferMachineTests {
    typealias E = OfferMachine.Event
    typealias A = OfferMachine.Action

    static let id = TransferID.random()
    static let unfinished: [TransferState] = TransferState.allCases.filter { !$0.isFinished }
    static let accepted: [TransferState] = unfinished.filter { $0 != .offered }

    struct Row: Sendable {
        let role: OfferMachine.Role
        let states: [TransferState?]
        let event: E
        let actions: [A]
    }

    static let events: [E] = [
        .offerArrived(.overBound("refused: too many waiting")),
        .offerArrived(.refused(peer: "refused: bad path", note: "bad path")),
        .offerArrived(.alreadyReceiving(recordID: "0123456789abcdef")),
        .offerArrived(.resumes(directory: "/in")),
        .offerArrived(.new(receiveWaiting: true, autoAccept: true)),
        .offerArrived(.new(receiveWaiting: false, autoAccept: true)),
        .offerArrived(.new(receiveWaiting: false, autoAccept: false)),
        .offeredAgain(otherPeer: true, fits: true, directory: "/in"),
        .offeredAgain(otherPeer: false, fits: false, directory: "/in"),
        .offeredAgain(otherPeer: false, fits: true, directory: "/in"),
        .answered(accept: true, directory: "/x"),
        .answered(accept: true, directory: nil),
        .answered(accept: false, directory: nil),
        .opened(have: [0, 2], offered: 3, whole: false),
        .opened(have: [0, 1, 2], offered: 3, whole: true),
        .acceptArrived(fits: true),
        .acceptArrived(fits: false),
        .declineArrived("no thanks"),
    ]

    static let rows: [Row] = [
        // Receiver: a new offer (no transfer of its ID here).
        Row(role: .receive, states: [nil], event: .offerArrived(.overBound("refused: too many waiting")),
            actions: [.send(.decline(id: id, reason: "refused: too many waiting")), .countRefused("refused: too many waiting")]),
        Row(role: .receive, states: [nil], event: .offerArrived(.refused(peer: "refused: bad path", note: "bad path")),
            actions: [.send(.decline(id: id, reason: "refused: bad path")), .report("refused an offer from bob: bad path")]),
        Row(role: .receive, states: [nil], event: .offerArrived(.alreadyReceiving(recordID: "0123456789abcdef")),
            actions: [.send(.decline(id: id, reason: "this content is already being received (transfer 01234567)"))]),
        Row(role: .receive, states: [nil], event: .offerArrived(.resumes(directory: "/in")),
            actions: [.register, .markResumed, .prepare(directory: "/in")]),
        Row(role: .receive, states: [nil], event: .offerArrived(.new(receiveWaiting: true, autoAccept: true)),
            actions: [.register, .announce, .handToWaiter]),
        Row(role: .receive, states: [nil], event: .offerArrived(.new(receiveWaiting: false, autoAccept: true)),
            actions: [.register, .announce, .prepare(directory: nil)]),
        Row(role: .receive, states: [nil], event: .offerArrived(.new(receiveWaiting: false, autoAccept: false)),
            actions: [.register, .announce, .hold]),
        // Receiver: offered again (after a reconnect).
        Row(role: .receive, states: unfinished, event: .offeredAgain(otherPeer: true, fits: true, directory: "/in"),
            actions: [.send(.decline(id: id, reason: "refused: this transfer ID belongs to another transfer")),
                      .report("refused an offer from bob: its transfer ID belongs to a transfer with another peer")]),
        Row(role: .receive, states: unfinished, event: .offeredAgain(otherPeer: false, fits: false, directory: "/in"),
            actions: [.send(.decline(id: id, reason: "refused: the offer does not match the transfer it continues")),
                      .report("refused an offer from bob: it does not match the transfer it continues")]),
        Row(role: .receive, states: [.offered], event: .offeredAgain(otherPeer: false, fits: true, directory: "/in"),
            actions: [.rebind]),
        Row(role: .receive, states: accepted, event: .offeredAgain(otherPeer: false, fits: true, directory: "/in"),
            actions: [.rebind, .markResumed, .prepare(directory: "/in")]),
        // Receiver: the answer, then the partial files open and the accept names what is held.
        Row(role: .receive, states: [.offered], event: .answered(accept: true, directory: "/x"), actions: [.prepare(directory: "/x")]),
        Row(role: .receive, states: [.offered], event: .answered(accept: true, directory: nil), actions: [.prepare(directory: nil)]),
        Row(role: .receive, states: [.offered], event: .answered(accept: false, directory: nil),
            actions: [.then(.declinedHere("declined by the user"))]),
        Row(role: .receive, states: accepted, event: .opened(have: [0, 2], offered: 3, whole: false),
            actions: [.activate, .send(.accept(id: id, have: [0b101])), .show]),
        Row(role: .receive, states: accepted, event: .opened(have: [0, 1, 2], offered: 3, whole: true),
            actions: [.activate, .send(.accept(id: id, have: [0b111])), .show, .complete]),
        // Sender: the receiver's answer.
        Row(role: .send, states: [.offered], event: .acceptArrived(fits: true), actions: [.startSending]),
        Row(role: .send, states: [.offered], event: .acceptArrived(fits: false), actions: [.then(.malformedAccept)]),
        Row(role: .send, states: unfinished, event: .declineArrived("no thanks"), actions: [.then(.peerDeclined("no thanks"))]),
    ]

    static let cells: [(OfferMachine.Role, TransferState?)] =
        [OfferMachine.Role.send, .receive].flatMap { role in ([nil] + TransferState.allCases.map(Optional.some)).map { (role, $0) } }

    @Test(arguments: 0..<cells.count)
    func everyEventIn(cell: Int) {
        let (role, state) = Self.cells[cell]
        let machine = OfferMachine(role: role, id: Self.id, peer: "bob")
        for event in Self.events {
            let listed = Self.rows.filter { $0.role == role && $0.event == event && $0.states.contains(state) }
            #expect(listed.count <= 1, "the table lists \(role) \(String(describing: state)) \(event) twice")
            #expect(machine.handle(event, in: state) == (listed.first?.actions ?? []),
                    "\(role) in \(state.map(\.rawValue) ?? "no transfer") on \(event)")
        }
    }

    /// Every event the table names is one the test runs (so no row goes untested).
    @Test func everyRowIsReached() {
        for row in Self.rows { #expect(Self.events.contains(row.event), "\(row.event)") }
    }
}
