internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerIndex
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// Pairing and the requests on sessions: inviting, answering invitations, pinning a paired
/// peer's key, messages, disconnect and connect, unpairing, and the sessions' half of
/// `peers`. The public calls (any thread) hop to `queue`; the rest runs on it.
extension ConnectionService {
    // MARK: - Requests (any thread)

    /// Dials `address` (on `queue`) and invites the node there, expecting the key `expected`
    /// when known. `completion` runs once: with the peer when the session is connected (the
    /// peer accepted), or with the reason it was not.
    func invite(address: String, expected: String?, context: String?,
                progress: @escaping @Sendable (NodeEvent) -> Void,
                completion: @escaping @Sendable (Result<PeerRef, EngineError>) -> Void) {
        startDial(address: address, expected: expected, context: context, progress: progress, completion: completion)
    }

    /// Makes sure a paired peer is connected: dials its last known address if needed and
    /// waits up to `timeout`. Blocks the calling thread (never call it on `queue`).
    func ensureConnected(_ peerText: String, timeout: Duration) throws(EngineError) {
        guard let target = try dialTarget(peerText, unlessA: { $0 == .connected }) else { return }
        if let address = target.address { dial(address: address, expected: target.key, context: nil, completion: nil) }
        if waitConnected(target.key, until: .now + timeout, every: 0.05) { return }
        throw .notConnected("cannot reach \(target.name)\(target.address.map { " at \($0)" } ?? " (no known address)"): is its daemon running?")
    }

    /// Dials `peerText` when it is not connected and waits until that dial ends or
    /// `patience` passes; never fails for a paired peer that is offline.
    func dialIfOffline(_ peerText: String, patience: Duration) throws(EngineError) {
        guard let target = try dialTarget(peerText, unlessA: { $0 != .closed }), let address = target.address else { return }
        let ended = Latch()
        dial(address: address, expected: target.key, context: nil) { _ in ended.set() }
        _ = waitConnected(target.key, until: .now + patience, every: 0.02, unless: { ended.isSet })
    }

    /// The peer `peerText` names, as a dial needs it (device key, name, last known address);
    /// nil when a session with it is already in a state `present` accepts.
    private func dialTarget(_ peerText: String, unlessA present: @escaping (SessionMachine.State) -> Bool) throws(EngineError)
        -> (key: String, name: String, address: String?)? {
        let plan: Result<(key: String, name: String, address: String?)?, EngineError> = queue.sync {
            do throws(EngineError) {
                let candidate = try resolve(peerText)
                let key = candidate.deviceID.filter { $0 != "-" }
                if hasSession(device: key, where: present) { return .success(nil) }
                return .success((key, candidate.name, candidate.addresses.first))
            } catch { return .failure(error) }
        }
        return try plan.get()
    }

    /// Polls until the device `key` is connected (true), or `deadline` passes or `unless`
    /// says to stop (false). Blocks the calling thread (never call it on `queue`).
    private func waitConnected(_ key: String, until deadline: ContinuousClock.Instant, every seconds: Double,
                               unless stop: () -> Bool = { false }) -> Bool {
        while ContinuousClock.now < deadline, !stop() {
            if queue.sync(execute: { hasSession(device: key, where: { $0 == .connected }) }) { return true }
            OSThread.sleep(for: .seconds(seconds))
        }
        return queue.sync { hasSession(device: key, where: { $0 == .connected }) }
    }

    /// Open invitations from peers.
    func invitations() -> [InvitationInfo] {
        queue.sync {
            sessions.values.filter { $0.invitationID != nil && $0.machine.state == .awaitingLocalDecision }
                .sorted { $0.id < $1.id }
                .map { session in
                    InvitationInfo(invitation: session.invitationID!, peer: session.peer,
                                   code: session.channel.shortAuthenticationString, context: session.context,
                                   address: session.channel.remoteDescription)
                }
        }
    }

    /// Accepts or declines an open invitation.
    func answer(invitation: String, accept: Bool) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            let wanted = invitation.uppercased()
            guard let session = sessions.values.first(where: { $0.invitationID == wanted && $0.machine.state == .awaitingLocalDecision }) else {
                return .failure(.notFound("no open invitation '\(invitation)'; see 'syncpeer invitations'"))
            }
            if accept { session.channel.limitFrames(to: WireLimits.maxFrameBody) }
            let actions = session.machine.handle(accept ? .localAccept : .localDecline)
            emit(.invitationClosed(.init(peer: session.peer, invitation: session.invitationID,
                                         outcome: accept ? "accepted" : "declined", time: now())))
            perform(actions, on: session)
            return .success(session.peer)
        }
        return try result.get()
    }

    /// Sends bytes as a message. Reliable: queued in order with every other frame.
    /// Unreliable: never queued behind bulk frames, and dropped (`sent` false) when the
    /// link to the peer is saturated.
    func sendMessage(to peerText: String, bytes body: [UInt8], unreliable: Bool) throws(EngineError) -> (peer: PeerRef, id: UInt64, sent: Bool) {
        guard body.count <= WireLimits.maxMessageBody else {
            throw .invalidArgument("the message is \(body.count) bytes; at most \(WireLimits.maxMessageBody) are allowed")
        }
        let result: Result<(PeerRef, UInt64, Bool), EngineError> = queue.sync {
            do throws(EngineError) {
                let session = try connectedSession(for: peerText)
                let id = session.nextMessageID
                session.nextMessageID += 1
                if unreliable {
                    return .success((session.peer, id, session.sendUnreliable(.message(id: id, body: body))))
                }
                session.send([.message(id: id, body: body)])
                return .success((session.peer, id, true))
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Ends the session with a peer (both ends see it closed). A paired peer is not
    /// redialled until the node restarts or it connects again.
    func disconnect(peer peerText: String) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            do throws(EngineError) {
                let session = try liveSession(for: peerText)
                let nearby = state.withLock { state in
                    state.redials[session.deviceKey] = nil
                    return state.nearby
                }
                nearby?.holdOff(session.deviceKey)
                session.closeReason = "disconnected by the user"
                session.redialAllowed = false
                perform(session.machine.handle(.localDisconnect), on: session)
                return .success(session.peer)
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Connects to a paired peer now, undoing `disconnect`: discovery may dial it again, and
    /// its stored address is dialled at once. Returns once connected (or throws why not).
    func connect(peer peerText: String, timeout: Duration) throws(EngineError) -> PeerRef {
        let target: Result<PeerRef, EngineError> = queue.sync {
            do {
                let record = try pairedPeer(for: peerText)
                nearby?.release(record.deviceID)
                return .success(try peerRef(record))
            } catch {
                return .failure(.wrapping(error))
            }
        }
        let peer = try target.get()
        try ensureConnected(peer.id.description, timeout: timeout)
        return peer
    }

    /// Lets a paired peer's offers of files (or, with `folders`, of shared folders: a switch
    /// of its own) be accepted without asking (into the receive folder), or not.
    func setAutoAccept(peer peerText: String, _ on: Bool, folders: Bool) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            do {
                var record = try pairedPeer(for: peerText)
                if folders { record.autoAcceptFolders = on } else { record.autoAccept = on }
                try index.upsertPeer(record)
                return .success(try peerRef(record))
            } catch {
                return .failure(.wrapping(error))
            }
        }
        return try result.get()
    }

    /// Forgets a paired peer: removes its pinned key and ends its session.
    func unpair(peer peerText: String) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            do {
                let record = try pairedPeer(for: peerText)
                _ = try index.deletePeer(deviceID: record.deviceID)
                state.withLock { state in
                    state.redials[record.deviceID] = nil
                    state.laterDelays[record.deviceID] = nil
                }
                let peer = try peerRef(record)
                for session in sessions.values where session.deviceKey == record.deviceID {
                    session.closeReason = "unpaired"
                    session.redialAllowed = false
                    perform(session.machine.handle(.localUnpair), on: session)
                }
                return .success(peer)
            } catch {
                return .failure(.wrapping(error))
            }
        }
        return try result.get()
    }

    // MARK: - On the queue

    /// Paired peers and live sessions, merged: one entry per device (by compact device ID).
    /// Paired peers the index cannot read fail the list with its cause (not "no peers").
    func peerEntries() throws(EngineError) -> [String: PeerSummary] {
        dispatchPrecondition(condition: .onQueue(queue))
        var entries: [String: PeerSummary] = [:]
        do throws(IndexError) {
            for record in try index.peers() where record.trust == .paired {
                guard let peer = try? peerRef(record) else { continue }  // a malformed device ID: not a peer
                entries[record.deviceID] = PeerSummary(peer: peer, paired: true, state: .notConnected, addresses: record.addresses,
                                                       lastSeen: record.lastSeen, discovered: false,
                                                       autoAccept: record.autoAccept, autoAcceptFolders: record.autoAcceptFolders)
                entries[record.deviceID]?.certificateID = try certificateID(of: record.deviceID)?.description
            }
        } catch { throw .index(error) }
        for session in sessions.values where session.machine.state != .closed {
            var entry = entries[session.deviceKey]
                ?? PeerSummary(peer: session.peer, paired: false, state: .notConnected, addresses: [], discovered: false)
            entry.state = Self.publicState(session.machine.state)
            entry.address = session.channel.remoteDescription
            (entry.path, entry.roundTripMs) = (session.path, session.roundTripMs)
            entries[session.deviceKey] = entry
        }
        return entries
    }

    func pin(_ session: Session) {
        dispatchPrecondition(condition: .onQueue(queue))
        let time = now()
        let existing: PeerRecord?
        do { existing = try index.peer(deviceID: session.deviceKey) } catch {
            // Not stored over what it holds (addresses, when paired) as if it were new.
            emitError(session.peer, "cannot store the pairing: cannot read \(session.peer.name)'s record: \(error)")
            return
        }
        var addresses = existing?.addresses ?? []
        if let address = session.dialAddress {
            addresses.removeAll { $0 == address }
            addresses.insert(address, at: 0)
        }
        let record = PeerRecord(deviceID: session.deviceKey, name: session.peer.name, publicKey: session.publicKey.bytes,
                                trust: .paired, firstSeen: existing?.firstSeen ?? time, lastSeen: time,
                                pairedAt: existing?.pairedAt ?? time, addresses: addresses)
        do {
            try index.upsertPeer(record)
            emit(.paired(.init(peer: session.peer, code: session.channel.shortAuthenticationString, time: now())))
        } catch {
            emitError(session.peer, "cannot store the pairing: \(error)")
        }
    }

    func markSeen(_ session: Session) {
        do { try index.updateLastSeen(deviceID: session.deviceKey, address: session.dialAddress) } catch {
            emitError(session.peer, "cannot record when \(session.peer.name) was last seen: \(error.description)")
        }
    }

    /// The peer removed its pairing with us and will refuse us: we drop ours too (our
    /// `peers` would otherwise list a paired peer that can never connect), with the reason
    /// on the session's end.
    func peerUnpairedUs(_ session: Session) {
        dispatchPrecondition(condition: .onQueue(queue))
        let record: PeerRecord?
        do { record = try index.peer(deviceID: session.deviceKey) } catch {
            session.closeReason = "\(session.peer.name) unpaired this device (pair again to reconnect)"
            state.withLock { $0.redials[session.deviceKey] = nil }
            emitError(session.peer, "\(session.peer.name) unpaired this device, but whether it is paired here cannot be read "
                + "(unpair it to remove it): \(error.description)")
            return
        }
        guard let record, record.trust == .paired else { return }
        session.closeReason = "\(session.peer.name) unpaired this device (pair again to reconnect)"
        state.withLock { state in
            state.redials[session.deviceKey] = nil
            state.laterDelays[session.deviceKey] = nil
        }
        do { _ = try index.deletePeer(deviceID: session.deviceKey) } catch {
            emitError(session.peer, "\(session.peer.name) unpaired this device, but its pairing cannot be removed here: \(error.description)")
        }
    }
}
