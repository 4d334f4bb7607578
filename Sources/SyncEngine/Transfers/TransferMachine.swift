internal import PeerWire

/// How a running transfer ends or pauses, as a pure function: an event (a frame from the
/// peer, a local decision or failure) in, the actions out: frames to send, partial data to
/// remove, and the end (`finish`: final, recorded, observers answered) or a pause
/// (resumable, recorded with its reason). Node carries the actions out for each direction;
/// the table test says, per event, what the peer is told and what is kept.
struct TransferMachine: Sendable {
    enum Event: Sendable, Equatable {
        /// The receiver declined the offer (sender).
        case peerDeclined(String)
        /// The other end cancelled.
        case peerCancelled(String)
        /// The receiver has every file in place (sender).
        case peerFinished
        /// The receiver could not put the files in place: full disk, write error (sender).
        case peerCouldNotFinish(String)
        /// The receiver's accept does not fit the offer (sender).
        case malformedAccept
        /// The receiver's acknowledgements break the window's rules (sender).
        case windowRejected(String)
        /// The sender cannot read a source file (or it changed while being sent).
        case sourceUnreadable(path: String, reason: String)
        /// The session ended; the text says why.
        case linkLost(String)
        /// The user cancelled here.
        case cancelledHere
        /// The user (or a `receive --decline`) declined the offer (receiver).
        case declinedHere(String)
        /// The receive folder cannot be opened or written (receiver, before accepting):
        /// `reason` for this node (it names the folder), `cause` for the sender (it does not).
        case cannotOpen(path: String, reason: String, cause: String, diskFull: Bool)
        /// A chunk or the final placing could not be written: kept, paused (receiver).
        case writeFailed(path: String, reason: String)
        /// The sender keeps sending chunks that fail verification (receiver).
        case tooManyBadChunks(Int)
        /// The sender's chunks do not fit its offer's streamed manifest (receiver).
        case manifestBroken(String)
        /// Every file is in place (receiver).
        case placed
    }

    /// Why a transfer ended or paused, as the observers (the CLI) are told.
    enum Outcome: Sendable, Equatable {
        case refused(String)
        case io(path: String, reason: String)

        var error: EngineError {
            switch self {
            case let .refused(text): .refused(text)
            case let .io(path, reason): .io(path: path, reason: reason)
            }
        }
    }

    enum Action: Sendable, Equatable {
        case send(Frame)
        /// Remove the receiver's partial files (nothing of the transfer stays on disk).
        case removePartials
        /// End for good in `state`: record it, report it, answer the observers (with the
        /// outcome's error, if any) and forget the transfer.
        case finish(TransferState, Outcome?)
        /// Stop, resumable: record and report the reason; observers get `fail` when given.
        case pause(reason: String, fail: Outcome?)
    }

    enum Direction: Sendable { case send, receive }

    let direction: Direction
    let id: TransferID
    /// The peer's display name, for the reasons shown.
    let peer: String

    /// How a receiver's decline starts when its receive folder cannot be written.
    static let unwritable = "cannot write to its receive folder"

    /// The actions for `event` in `state`. A finished transfer does nothing more; an event
    /// that does not apply to this direction does nothing.
    func handle(_ event: Event, in state: TransferState) -> [Action] {
        guard !state.isFinished else { return [] }
        switch (direction, event) {
        case let (.send, .peerDeclined(reason)) where reason.hasPrefix(Self.unwritable):
            // Not the user's choice: the receiver's folder refused it. Said as such, with
            // what to do.
            return [.finish(.failed, .refused("\(peer) \(reason); nothing was sent: \(peer) must free or fix that folder, or choose another ('syncpeer daemon --receive-dir DIR'), then send again"))]
        case let (.send, .peerDeclined(reason)):
            return [.finish(.declined, .refused("\(peer) declined: \(reason)"))]
        case let (_, .peerCancelled(reason)):
            let end = Action.finish(.cancelled, .refused("\(peer) cancelled: \(reason)"))
            return direction == .receive ? [.removePartials, end] : [end]
        case (.send, .peerFinished):
            return [.finish(.completed, nil)]
        case let (.send, .peerCouldNotFinish(reason)):
            let text = "\(peer) could not finish: \(reason)"
            return [.pause(reason: text, fail: .refused(text))]
        case (.send, .malformedAccept):
            return [.send(.cancel(id: id, reason: "the accept's chunk bitmap does not match the offer")),
                    .finish(.failed, .refused("\(peer) sent a malformed accept"))]
        case let (.send, .windowRejected(why)):
            return [.send(.cancel(id: id, reason: why)), .finish(.failed, .refused(why))]
        case let (.send, .sourceUnreadable(path, reason)):
            return [.send(.cancel(id: id, reason: "the sender cannot read its file")), .finish(.failed, .io(path: path, reason: reason))]
        case let (_, .linkLost(reason)):
            return [.pause(reason: reason, fail: nil)]
        case (.send, .cancelledHere):
            return [.send(.cancel(id: id, reason: "cancelled by the sender")), .finish(.cancelled, .refused("transfer cancelled"))]
        case (.receive, .cancelledHere):
            return [.send(.cancel(id: id, reason: "cancelled by the receiver")), .removePartials,
                    .finish(.cancelled, .refused("transfer cancelled"))]
        case let (.receive, .declinedHere(reason)):
            return [.send(.decline(id: id, reason: reason)), .finish(.declined, nil)]
        case let (.receive, .cannotOpen(path, reason, cause, diskFull)):
            // Whatever partial data exists is kept: resumable once the folder is usable
            // again ('syncpeer cancel' removes it).
            // The sender is told the real reason (bounded), not "an error", and never this
            // node's paths.
            return [.send(.decline(id: id, reason: "\(Self.unwritable): \(diskFull ? "disk full" : String(cause.prefix(300)))")),
                    .finish(.paused, .io(path: path, reason: reason))]
        case let (.receive, .writeFailed(path, reason)):
            return [.send(.done(id: id, ok: false, reason: String(reason.prefix(400)))),
                    .pause(reason: reason, fail: .io(path: path, reason: reason))]
        case let (.receive, .tooManyBadChunks(count)):
            // A failed transfer is never resumed: its partial data would stay on disk for
            // good (a sender could fill the disk this way).
            return [.send(.cancel(id: id, reason: "too many chunks failed verification")), .removePartials,
                    .finish(.failed, .refused("\(peer) sent \(count) chunks that failed verification; the transfer was stopped and nothing was put in place"))]
        case let (.receive, .manifestBroken(why)):
            // Like a lying sender's chunks: nothing it sent is kept.
            return [.send(.cancel(id: id, reason: String("chunks that do not fit the offer: \(why)".prefix(400)))), .removePartials,
                    .finish(.failed, .refused("\(peer) sent chunks that do not fit its offer (\(why)); the transfer was stopped and nothing was put in place"))]
        case (.receive, .placed):
            return [.send(.done(id: id, ok: true, reason: "")), .finish(.completed, nil)]
        default:
            return []
        }
    }
}
