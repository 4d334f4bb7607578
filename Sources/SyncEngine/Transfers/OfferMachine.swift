internal import PeerWire

/// The offer→accept phase of a transfer as a pure function, as `TransferMachine` is for its
/// end: what the service found out (an offer checked, the user's answer, the partial files
/// opened, the receiver's accept) in, with the transfer's state (`nil`: no transfer of that
/// ID runs here), and the actions out. `TransferService` finds the facts (decoding, the
/// index, the disk) and carries the actions out; the table test covers every role × state
/// × event.
///
///     receiver: offer ─▶ refused (declined, reported)
///                     ├▶ resumed (accepted before) ──────────────┐
///                     └▶ offered ─▶ asked (user, receive, auto) ─┴▶ preparing ─▶ opened: accept(have) ─▶ active
///                                   └▶ declined here
///     sender:   offered ─▶ accept fits ─▶ active (sending) · malformed accept ─▶ failed · declined
struct OfferMachine: Sendable {
    enum Role: Sendable { case send, receive }

    /// What a new offer (an ID no transfer here runs under) turned out to be.
    enum Arrival: Sendable, Equatable {
        /// Past the peer's bound on offers waiting for an answer; the text goes to the peer.
        case overBound(String)
        /// Unsound (name, manifests, paths, counts) or under an ID that is not the peer's:
        /// `peer` is what the sender is told, `note` what the user here is told.
        case refused(peer: String, note: String)
        /// The same content is being received already, as the transfer recorded as `recordID`.
        case alreadyReceiving(recordID: String)
        /// Accepted before (same ID, same content, or the same file whose source changed):
        /// resumed into `directory` without asking again.
        case resumes(directory: String)
        /// New: a waiting `receive` takes it, or auto-accept does, or it waits for the user.
        case new(receiveWaiting: Bool, autoAccept: Bool)
    }

    enum Event: Sendable, Equatable {
        /// (Receiver) an offer under an ID no transfer here runs under, checked.
        case offerArrived(Arrival)
        /// (Receiver) the sender offered a running transfer again (after a reconnect):
        /// whether it comes from another peer than the transfer's, whether it fits the
        /// transfer it continues (a streamed manifest, whole now), and where the transfer's
        /// partial data is (`nil`: not accepted yet).
        case offeredAgain(otherPeer: Bool, fits: Bool, directory: String?)
        /// (Receiver) the user, a waiting `receive` or auto-accept answered: accepted into
        /// `directory` (`nil`: the receive folder), or declined.
        case answered(accept: Bool, directory: String?)
        /// (Receiver) the partial files are open and hold `have` of the `offered` chunks the
        /// offer listed; `whole`: every chunk of the transfer is held.
        case opened(have: Set<Int>, offered: Int, whole: Bool)
        /// (Sender) the receiver's accept: whether its bitmap fits the offer.
        case acceptArrived(fits: Bool)
        /// (Sender) the receiver declined.
        case declineArrived(String)
    }

    enum Action: Sendable, Equatable {
        case send(Frame)
        /// Tell the user here (an error event naming the peer).
        case report(String)
        /// Count (and report, sparingly) an offer refused by the bound on waiting offers.
        case countRefused(String)
        /// Keep the new transfer in the table (under the offer's ID, on the offer's session).
        case register
        /// The transfer follows the session the offer came on.
        case rebind
        /// Show the offer (the `offer` event).
        case announce
        /// Hand the offer to the first waiting `receive`.
        case handToWaiter
        /// Keep it offered, shown, until the user answers.
        case hold
        /// Mark it resumed (it is not asked about again).
        case markResumed
        /// Move to preparing and open the partial files in `directory` (`nil`: the receive
        /// folder; the transfer's own directory when offered again).
        case prepare(directory: String?)
        /// Record the receive and move to active (what is held counts as done).
        case activate
        /// Emit the transfer's state.
        case show
        /// Every chunk is held already: put the files in place.
        case complete
        /// (Sender) take the accept's bitmap as the window and start sending.
        case startSending
        /// The end phase takes over: `TransferMachine` handles this event.
        case then(TransferMachine.Event)
    }

    let role: Role
    let id: TransferID
    /// The peer's display name, for what the user is told.
    let peer: String

    /// The actions for `event` in `state` (`nil`: no transfer of this ID runs here). A
    /// finished transfer does nothing more; an event of the other role does nothing.
    func handle(_ event: Event, in state: TransferState?) -> [Action] {
        if state?.isFinished == true { return [] }
        switch (role, event) {
        case let (.receive, .offerArrived(arrival)):
            guard state == nil else { return [] }
            return arrived(arrival)
        case let (.receive, .offeredAgain(otherPeer, fits, directory)):
            guard let state else { return [] }
            if otherPeer {
                return [.send(.decline(id: id, reason: "refused: this transfer ID belongs to another transfer")),
                        .report("refused an offer from \(peer): its transfer ID belongs to a transfer with another peer")]
            }
            if !fits {
                return [.send(.decline(id: id, reason: "refused: the offer does not match the transfer it continues")),
                        .report("refused an offer from \(peer): it does not match the transfer it continues")]
            }
            // Still waiting for an answer: it only follows the new session.
            if state == .offered { return [.rebind] }
            // Accepted before: resumed, answering with what is held.
            guard let directory else { return [.rebind, .markResumed] }
            return [.rebind, .markResumed, .prepare(directory: directory)]
        case let (.receive, .answered(accept, directory)):
            guard state == .offered else { return [] }
            return accept ? [.prepare(directory: directory)] : [.then(.declinedHere("declined by the user"))]
        case let (.receive, .opened(have, offered, whole)):
            guard state != nil, state != .offered else { return [] }
            let accept = Action.send(.accept(id: id, have: ChunkBitmap.encode(have, count: offered)))
            return [.activate, accept, .show] + (whole ? [.complete] : [])
        case let (.send, .acceptArrived(fits)):
            guard state == .offered else { return [] }
            return fits ? [.startSending] : [.then(.malformedAccept)]
        case let (.send, .declineArrived(reason)):
            guard state != nil else { return [] }
            return [.then(.peerDeclined(reason))]
        default:
            return []
        }
    }

    private func arrived(_ arrival: Arrival) -> [Action] {
        switch arrival {
        case let .overBound(reason):
            return [.send(.decline(id: id, reason: reason)), .countRefused(reason)]
        case let .refused(told, note):
            return [.send(.decline(id: id, reason: told)), .report("refused an offer from \(peer): \(note)")]
        case let .alreadyReceiving(recordID):
            return [.send(.decline(id: id, reason: "this content is already being received (transfer \(recordID.prefix(8)))"))]
        case let .resumes(directory):
            return [.register, .markResumed, .prepare(directory: directory)]
        case let .new(receiveWaiting, autoAccept):
            if receiveWaiting { return [.register, .announce, .handToWaiter] }
            return [.register, .announce, autoAccept ? .prepare(directory: nil) : .hold]
        }
    }
}
