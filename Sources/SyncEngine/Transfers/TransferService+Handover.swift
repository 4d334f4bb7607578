internal import Dispatch

/// Two sessions with one peer (both dialled at once, or one dialled again): both ends keep
/// one and close the other (`ConnectionService.begin`). The transfers that ran on the
/// closed one are not paused: an outgoing one is offered again on the session kept (the
/// receiver answers with what it holds, as after any interruption), an incoming one waits
/// for that offer. Only when no session with the peer connects within `handoverGrace` do
/// they pause as for a lost link.
extension TransferService {
    /// Longer than a handshake may take (10 s): the kept session may still be connecting.
    static let handoverGrace: DispatchTimeInterval = .seconds(15)

    func handOver(_ handed: [any TransferBase], from session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        let successor = link?.connectedSession(device: session.deviceKey)
        var waiting: [any TransferBase] = []
        for transfer in handed {
            transfer.sessionID = nil
            if let outgoing = transfer as? OutgoingTransfer {
                if let successor {
                    offer(outgoing, on: successor)
                    continue
                }
                outgoing.awaitingSuccessor = true
            }
            waiting.append(transfer)
        }
        guard !waiting.isEmpty else { return }
        queue.asyncAfter(deadline: .now() + Self.handoverGrace) { [self, waiting] in
            let reason = "connection to \(session.peer.name) lost; resumes when it is back"
            for transfer in waiting where transfer.sessionID == nil && !transfer.isFinished && transfer.state != .paused {
                if let outgoing = transfer as? OutgoingTransfer {
                    outgoing.awaitingSuccessor = false
                    perform(.linkLost(reason), on: outgoing)
                } else if let incoming = transfer as? IncomingTransfer {
                    perform(.linkLost(reason), on: incoming)
                }
            }
        }
    }
}
