internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// What one peer, paired or not, may make the node hold: unpaired sessions per source
/// address (pending handshakes are capped in `acceptLoop`); block answers in preparation
/// per session (FolderService+Serving). See also `SessionFlow` and the index quota there.
extension ConnectionService {
    // MARK: - Unpaired sessions

    /// Takes a slot for a new session with an unknown peer from `source`, making room by
    /// ending the oldest unpaired session of the busiest source if that is fair. Returns
    /// false after ending `session` when there is no slot for it. Runs on `queue`.
    func admitUnpaired(_ session: Session, from source: String) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        switch state.withLock({ $0.unpairedSessions.admit(id: session.id, source: source, holder: session) }) {
        case .admitted:
            return true
        case let .admittedEvicting(oldest):
            let reason = "dropped to make room for another address (at most \(Self.maxUnpairedSessions) unpaired connections)"
            oldest.closeReason = reason
            oldest.redialAllowed = false
            if oldest.invitationID != nil, oldest.machine.state == .awaitingLocalDecision {
                emit(.invitationClosed(.init(peer: oldest.peer, invitation: oldest.invitationID, outcome: "dropped", time: now())))
            }
            oldest.send([.close(code: .tryLater, reason: "too many unpaired connections")])
            perform(oldest.machine.handle(.transportClosed(reason)), on: oldest)
            return true
        case let .refused(why):
            session.closeReason = "refused"
            session.redialAllowed = false
            session.send([.close(code: .tryLater, reason: "too many unpaired connections from your address")])
            _ = state.withLock { $0.sessions.removeValue(forKey: session.id) }
            session.flow.cancel()
            session.closeAfterQueuedSends()
            connectionRefused(from: source, "unpaired connections: \(why)")
            return false
        }
    }

    /// Reports refused connections without flooding the events: the 1st, 10th, 100th, ...
    func connectionRefused(from source: String, _ why: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        let refused = state.withLock { state in
            state.refusedConnections += 1
            return state.refusedConnections
        }
        guard Self.isReported(refused) else { return }
        emitError(nil, "refused a connection from \(source) (\(refused) refused so far): \(why)")
    }
}
