internal import Dispatch
internal import PeerIndex

/// Carries out `TransferMachine`'s actions for each direction (on the node's queue).
extension TransferService {
    func perform(_ event: TransferMachine.Event, on transfer: OutgoingTransfer) {
        dispatchPrecondition(condition: .onQueue(queue))
        let machine = TransferMachine(direction: .send, id: transfer.id, peer: transfer.peer.name)
        for action in machine.handle(event, in: transfer.state) {
            switch action {
            case let .send(frame):
                sendTo(transfer, [frame])
            case .removePartials:
                break  // a sender has none
            case let .finish(state, outcome):
                finishOutgoing(transfer, state: state, error: outcome?.error)
            case let .pause(reason, fail):
                pauseOutgoing(transfer, reason: reason)
                self.fail(transfer, fail)
            }
        }
    }

    func perform(_ event: TransferMachine.Event, on transfer: IncomingTransfer) {
        dispatchPrecondition(condition: .onQueue(queue))
        let machine = TransferMachine(direction: .receive, id: transfer.id, peer: transfer.peer.name)
        for action in machine.handle(event, in: transfer.state) {
            switch action {
            case let .send(frame):
                sendTo(transfer, [frame])
            case .removePartials:
                removePartials(transfer)
            case let .finish(state, outcome):
                finishIncoming(transfer, state: state, error: outcome?.error)
            case let .pause(reason, fail):
                // Verified chunks are kept: recorded (once durable), so a resume finds them.
                recordVerified(transfer, force: true)
                let recordID = transfer.with { t in
                    t.shared.move(to: .paused)
                    t.shared.pauseReason = reason
                    return t.recordID
                }
                recordTransfer(transfer, "its paused state") { store throws(IndexError) in
                    // Accepted but not recorded yet (its partial files were still opening).
                    guard try store.transfer(id: recordID) != nil else { return }
                    try store.updateTransferState(id: recordID, to: .paused, error: reason)
                }
                emitTransfer(transfer, force: true, reason: reason)
                self.fail(transfer, fail)
            }
        }
    }

    /// Answers a transfer's observers with `outcome`'s error (they stop following it).
    private func fail(_ transfer: any TransferBase, _ outcome: TransferMachine.Outcome?) {
        guard let outcome else { return }
        for observer in transfer.takeObservers() { observer.completion(.failure(outcome.error)) }
    }
}
