internal import Dispatch
internal import PeerWire

/// Carries out `OfferMachine`'s actions for each role (on the node's queue).
extension TransferService {
    /// The receiver's steps for `transfer` (`nil` for an offer refused before it became
    /// one). Frames go on `session` when the steps answer an offer that came on it, else on
    /// the transfer's own session.
    func carryOut(_ actions: [OfferMachine.Action], on transfer: IncomingTransfer?, session: LinkSession?) {
        dispatchPrecondition(condition: .onQueue(queue))
        for action in actions {
            switch action {
            case let .send(frame):
                if let session { link?.send([frame], on: session.id) } else if let transfer { sendTo(transfer, [frame]) }
            case let .report(text):
                emitError(session?.peer ?? transfer?.peer, text)
            case let .countRefused(reason):
                if let session { pendingOfferRefused(reason, from: session) }
            case .then(let event):
                if let transfer { perform(event, on: transfer) }
            case .startSending:
                break  // a sender's step
            default:
                guard let transfer else { continue }
                carryOut(action, on: transfer, session: session)
            }
        }
    }

    /// One receiver's step that needs its transfer.
    private func carryOut(_ action: OfferMachine.Action, on transfer: IncomingTransfer, session: LinkSession?) {
        switch action {
        case .register:
            transfer.sessionID = session?.id
            table { $0.incoming[transfer.id] = transfer }
        case .rebind:
            if let session { transfer.sessionID = session.id }
        case .announce:
            let offer = transfer.offer
            emit(.offer(.init(peer: transfer.peer, transfer: offer.id.description, name: offer.name,
                              total: Int64(offer.totalSize), files: offer.entries.count, time: now())))
        case .handToWaiter:
            if let waiter = table({ $0.receiveWaiters.isEmpty ? nil : $0.receiveWaiters.removeFirst() }) {
                take(transfer, with: waiter)
            } else {
                emitTransfer(transfer, force: true)
            }
        case .hold, .show:
            emitTransfer(transfer, force: true)
        case .markResumed:
            transfer.with { $0.resumed = true }
        case let .prepare(directory):
            acceptIncoming(transfer, into: directory ?? transfer.directory ?? config.receiveDirectory)
        case .activate:
            recordIncoming(transfer, directory: transfer.directory ?? config.receiveDirectory)
            let clock = transfer.elapsedSeconds()
            transfer.with { t in
                t.shared.move(to: .active)
                t.shared.meter.restart(time: clock, bytes: t.verifiedBytes)
            }
        case .complete:
            complete(transfer)
        case .send, .report, .countRefused, .then, .startSending:
            break  // carried out above
        }
    }

    /// The sender's steps for `transfer`; `have` is the accept's bitmap, decoded.
    func carryOut(_ actions: [OfferMachine.Action], on transfer: OutgoingTransfer, have: Set<Int>?, session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        for action in actions {
            switch action {
            case .startSending:
                if let have { startSending(transfer, have: have, on: session) }
            case let .then(event):
                perform(event, on: transfer)
            case let .send(frame):
                sendTo(transfer, [frame])
            default:
                break  // a receiver's step
            }
        }
    }
}
