import PeerWire
import Testing
@testable import SyncEngine

/// How transfers end or pause, as event → action tables: what the peer is told, what stays
/// on disk, and in which state the transfer ends.
struct TransferMachineTests {
    typealias E = TransferMachine.Event
    typealias A = TransferMachine.Action

    static let id = TransferID.random()

    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let direction: TransferMachine.Direction
        let state: TransferState
        let event: E
        let actions: [A]
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        // Sender.
        Row(name: "sender: the receiver declines", direction: .send, state: .offered, event: .peerDeclined("no"),
            actions: [.finish(.declined, .refused("bob declined: no"))]),
        Row(name: "sender: the receiver cancels; nothing is sent back", direction: .send, state: .active, event: .peerCancelled("stop"),
            actions: [.finish(.cancelled, .refused("bob cancelled: stop"))]),
        Row(name: "sender: the receiver has it all", direction: .send, state: .finishing, event: .peerFinished,
            actions: [.finish(.completed, nil)]),
        Row(name: "sender: the receiver could not finish: paused, resumable, the CLI told", direction: .send, state: .finishing,
            event: .peerCouldNotFinish("disk full"),
            actions: [.pause(reason: "bob could not finish: disk full", fail: .refused("bob could not finish: disk full"))]),
        Row(name: "sender: a malformed accept fails the transfer and tells the peer", direction: .send, state: .offered,
            event: .malformedAccept,
            actions: [.send(.cancel(id: id, reason: "the accept's chunk bitmap does not match the offer")),
                      .finish(.failed, .refused("bob sent a malformed accept"))]),
        Row(name: "sender: an unreadable source fails the transfer", direction: .send, state: .active,
            event: .sourceUnreadable(path: "/a", reason: "changed"),
            actions: [.send(.cancel(id: id, reason: "the sender cannot read its file")), .finish(.failed, .io(path: "/a", reason: "changed"))]),
        Row(name: "sender: a lost link pauses without failing the CLI", direction: .send, state: .active, event: .linkLost("gone"),
            actions: [.pause(reason: "gone", fail: nil)]),
        Row(name: "sender: cancelled here, the receiver is told", direction: .send, state: .paused, event: .cancelledHere,
            actions: [.send(.cancel(id: id, reason: "cancelled by the sender")), .finish(.cancelled, .refused("transfer cancelled"))]),
        // Receiver.
        Row(name: "receiver: the sender cancels: partial data removed", direction: .receive, state: .active, event: .peerCancelled("oops"),
            actions: [.removePartials, .finish(.cancelled, .refused("bob cancelled: oops"))]),
        Row(name: "receiver: cancelled here: peer told, partial data removed", direction: .receive, state: .paused, event: .cancelledHere,
            actions: [.send(.cancel(id: id, reason: "cancelled by the receiver")), .removePartials,
                      .finish(.cancelled, .refused("transfer cancelled"))]),
        Row(name: "receiver: declined here", direction: .receive, state: .offered, event: .declinedHere("declined by the user"),
            actions: [.send(.decline(id: id, reason: "declined by the user")), .finish(.declined, nil)]),
        Row(name: "receiver: a folder it cannot write: declined with the real reason, partial data kept (resumable)", direction: .receive, state: .preparing,
            event: .cannotOpen(path: "/in", reason: "open /in: permission denied", cause: "permission denied", diskFull: false),
            actions: [.send(.decline(id: id, reason: "cannot write to its receive folder: permission denied")),
                      .finish(.paused, .io(path: "/in", reason: "open /in: permission denied"))]),
        Row(name: "sender: the receiver cannot write its folder: failed, said so, not 'declined'", direction: .send, state: .offered,
            event: .peerDeclined("cannot write to its receive folder: Permission denied"),
            actions: [.finish(.failed, .refused("bob cannot write to its receive folder: Permission denied; nothing was sent: bob must free or fix that folder, or choose another ('syncpeer daemon --receive-dir DIR'), then send again"))]),
        Row(name: "receiver: a write fails: the sender is told, paused, verified chunks kept", direction: .receive, state: .active,
            event: .writeFailed(path: "/in", reason: "disk full"),
            actions: [.send(.done(id: id, ok: false, reason: "disk full")), .pause(reason: "disk full", fail: .io(path: "/in", reason: "disk full"))]),
        Row(name: "receiver: a lying sender: cut off, nothing kept", direction: .receive, state: .active, event: .tooManyBadChunks(9),
            actions: [.send(.cancel(id: id, reason: "too many chunks failed verification")), .removePartials,
                      .finish(.failed, .refused("bob sent 9 chunks that failed verification; the transfer was stopped and nothing was put in place"))]),
        Row(name: "receiver: in place", direction: .receive, state: .finishing, event: .placed,
            actions: [.send(.done(id: id, ok: true, reason: "")), .finish(.completed, nil)]),
        // Nothing happens to a finished transfer, nor for events of the other direction.
        Row(name: "a finished transfer ignores a late cancel", direction: .receive, state: .completed, event: .peerCancelled("late"),
            actions: []),
        Row(name: "a receiver ignores sender-only events", direction: .receive, state: .active, event: .peerFinished, actions: []),
        Row(name: "a sender ignores receiver-only events", direction: .send, state: .active, event: .placed, actions: []),
    ]

    @Test(arguments: rows)
    func row(_ row: Row) {
        let machine = TransferMachine(direction: row.direction, id: Self.id, peer: "bob")
        #expect(machine.handle(row.event, in: row.state) == row.actions)
    }

    /// Every end a machine chooses is a step the transfer state allows from where it is.
    @Test(arguments: rows)
    func endsAreAllowedSteps(_ row: Row) {
        let machine = TransferMachine(direction: row.direction, id: Self.id, peer: "bob")
        for case let .finish(state, _) in machine.handle(row.event, in: row.state) {
            #expect(row.state.allows(state), "\(row.state) → \(state)")
        }
    }
}
