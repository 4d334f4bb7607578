internal import Foundation
internal import PeerCrypto
internal import PeerIndex
internal import PeerWire

/// What one peer, paired or not, may make the node hold: unpaired sessions per source
/// address (pending handshakes are capped in `acceptLoop`), block answers in preparation
/// per session. See also `SessionFlow` and the index quota in `Node+IndexQuota`.
extension Node {
    // MARK: - Unpaired sessions

    /// Takes a slot for a new session with an unknown peer from `source`, making room by
    /// ending the oldest unpaired session of the busiest source if that is fair. Returns
    /// false after ending `session` when there is no slot for it. Runs on `queue`.
    func admitUnpaired(_ session: Session, from source: String) -> Bool {
        switch unpairedSessions.admit(id: session.id, source: source, holder: session) {
        case .admitted:
            return true
        case let .admittedEvicting(oldest):
            let reason = "dropped to make room for another address (at most \(Self.maxUnpairedSessions) unpaired connections)"
            oldest.closeReason = reason
            oldest.redialAllowed = false
            if oldest.invitationID != nil, oldest.machine.state == .awaitingLocalDecision {
                emit(.invitationClosed(.init(peer: oldest.peer, invitation: oldest.invitationID, outcome: "dropped", time: now())))
            }
            oldest.send([.close(code: .normal, reason: "too many unpaired connections")])
            perform(oldest.machine.handle(.transportClosed(reason)), on: oldest)
            return true
        case let .refused(why):
            session.closeReason = "refused"
            session.redialAllowed = false
            session.send([.close(code: .normal, reason: "too many unpaired connections from your address")])
            sessions[session.id] = nil
            session.flow.cancel()
            session.closeAfterQueuedSends()
            connectionRefused(from: source, "unpaired connections: \(why)")
            return false
        }
    }

    /// Reports refused connections without flooding the events: the 1st, 10th, 100th, ...
    func connectionRefused(from source: String, _ why: String) {
        refusedConnections += 1
        var mark = 1
        while mark < refusedConnections { mark *= 10 }
        guard mark == refusedConnections else { return }
        emitError(nil, "refused a connection from \(source) (\(refusedConnections) refused so far): \(why)")
    }

    // MARK: - Serving blocks

    /// Serves a member's block request on the folder's serve queue. At most
    /// `SessionFlow.serveBudget` bytes of answers are prepared at once per session; later
    /// requests wait here in order (and count as unhandled, so the reader stops reading the
    /// peer). The answer's bytes count in the session's flow until they are written.
    func serveBlock(_ frame: Frame, from folder: SharedFolder, to session: Session) {
        guard case let .blockRequest(_, _, _, _, size, _) = frame else { return }
        if !session.parkedBlockRequests.isEmpty || !session.flow.reserve(Self.serveCost(size)) {
            session.parkedBlockRequests.append((frame, folder))
            session.flow.received(0)
            return
        }
        startServe(frame, from: folder, to: session)
    }

    private static func serveCost(_ size: UInt32) -> Int { Int(size) + 64 }

    /// Reads and sends one answer; its cost is already reserved.
    private func startServe(_ frame: Frame, from folder: SharedFolder, to session: Session) {
        guard case let .blockRequest(request, _, path, offset, size, hash) = frame else { return }
        let device = session.deviceKey
        folder.serveQueue.async { [self] in
            let answer = folder.readBlock(path: path, offset: offset, size: size, hash: hash)
            if case let .data(bytes) = answer {
                folder.activity.served(to: device, bytes: bytes.count)
                session.sendFromAnyThread([.blockResponse(request: request, ok: true, data: bytes)])
            } else {
                session.sendFromAnyThread([.blockResponse(request: request, ok: false, data: [])])
            }
            session.flow.release(Self.serveCost(size))
            queue.async { [self] in
                if answer == .notShared { blockRefused(to: session, folder: folder) }
                resumeServing(session)
            }
        }
    }

    /// Starts the waiting requests that fit the budget now.
    private func resumeServing(_ session: Session) {
        while let (frame, folder) = session.parkedBlockRequests.first {
            guard sessions[session.id] === session else { return }
            guard case let .blockRequest(_, _, _, _, size, _) = frame, session.flow.reserve(Self.serveCost(size)) else { return }
            session.parkedBlockRequests.removeFirst()
            session.flow.handled(0)
            startServe(frame, from: folder, to: session)
        }
    }
}

// MARK: - Index quota

extension Node {
    /// The most index entries (tombstones included) stored for one peer in one folder:
    /// twice our own entries (a member may hold all we hold, and as much again that we have
    /// not pulled yet) plus `config.peerIndexAllowance` (a folder we just joined is empty
    /// here). Beyond it one member could grow the index on disk and the planner's memory
    /// without end (1,000,000 tombstones: 472 MB of index). "Our own" leaves out the
    /// tombstones we recorded for other devices' deletions: applying a member's flood of
    /// deletions must not raise that member's quota.
    func indexQuota(folderID: String) throws(IndexError) -> Int {
        2 * (try index.ownEntryCount(folderID: folderID, localDevice: identity.deviceID.compact)) + config.peerIndexAllowance
    }

    /// Whether storing `records` keeps the peer within its quota; if not, says so once per
    /// session (an error event and the folder's status, naming the peer) and the caller
    /// refuses the batch (no ack: an honest peer sends it again later).
    func withinIndexQuota(_ records: [RemoteFileRecord], folder: SharedFolder, from session: Session) -> Bool {
        let paths = Set(records.map(\.path))
        let after: Int
        let quota: Int
        do {
            let counts = try index.remoteFileCounts(folderID: folder.id, deviceID: session.deviceKey, paths: Array(paths))
            after = counts.stored + paths.count - counts.existing
            quota = try indexQuota(folderID: folder.id)
        } catch {
            emitError(session.peer, "folder \(folder.label): cannot check \(session.peer.name)'s index quota: \(error)")
            return false
        }
        guard after > quota else { return true }
        if session.quotaReported.insert(folder.id).inserted {
            let message = "folder \(folder.label): \(session.peer.name) (\(session.peer.id)) sent more index entries than it may "
                + "store (\(after) > \(quota): twice ours plus \(config.peerIndexAllowance)); its further entries are refused"
            emitError(session.peer, message)
            folder.setError(message)
        }
        return false
    }
}
