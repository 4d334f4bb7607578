package import PeerWire

/// The life of one connection after its Noise handshake, as a pure state machine: events
/// in, actions out, no I/O (the node performs the actions). Tested by event → action tables.
///
///     initiator                                   responder
///     ─────────                                   ─────────
///     handshake done ──────────────────────────── handshake done
///                                                   paired peers unreadable? ── yes ─▶ close, refused with the cause
///       awaitingPeerDecision                        known peer?  ── yes ─▶ send accepted, connected
///                                                   name of a paired peer with a new key?
///                                                     ── yes ─▶ close(impersonation)
///                                                   else send pending, awaitingLocalDecision
///     pairing(pending)  → show SAS, keep waiting     user accepts → pin key, send accepted, connected
///     pairing(accepted) → pin key, connected         user declines / 30 s pass → send declined/expired, close
///     pairing(declined|expired|refused) → closed
///
/// Nothing the peer sends is acted upon before the session is connected: messages and
/// stream frames that arrive earlier are dropped (and counted), never delivered.
package struct SessionMachine: Sendable {
    package enum Role: Sendable, Equatable { case initiator, responder }

    /// What the node knows about the peer when the handshake completes.
    package enum PeerStanding: Sendable, Equatable {
        /// The key is pinned as a paired peer.
        case paired
        /// Never seen (or unpaired): the connection is an invitation.
        case unknown
        /// Presents a new key under a paired peer's name, or a different key where a paired
        /// peer was expected: refused.
        case impersonation(String)
        /// Who is paired cannot be read (a damaged index, a failing disk): neither paired nor
        /// an invitation; refused with the cause, the peer told to try again later.
        case unreadable(String)
    }

    package enum State: String, Sendable, Equatable, Codable {
        /// Waiting for the peer's user to accept our invitation.
        case awaitingPeerDecision
        /// Waiting for our user to accept the peer's invitation.
        case awaitingLocalDecision
        case connected
        case closed
    }

    package enum Event: Sendable, Equatable {
        case handshakeCompleted(PeerStanding)
        case frame(Frame)
        case localAccept
        case localDecline
        case invitationExpired
        /// The transport ended (error or peer gone).
        case transportClosed(String)
        /// The local user asked to end the session.
        case localDisconnect
        /// The user removed the pairing (`syncpeer unpair`): the peer is told so.
        case localUnpair
        /// The node is stopping (the peer may redial later).
        case localShutdown
    }

    package enum Action: Sendable, Equatable {
        case send(Frame)
        /// The state changed (report it).
        case state(State)
        /// Show an invitation to the local user (responder).
        case raiseInvitation
        /// The peer has our invitation and shows the SAS (initiator).
        case invitationPending
        /// Store the peer's key as paired.
        case pinPeer
        case deliverMessage(id: UInt64, body: [UInt8])
        /// The paired peer's TLS certificate (for relays and global discovery): check that it
        /// names the session's key, and pin its ID.
        case pinCertificate([UInt8])
        /// A transfer or shared-folder frame (offer, chunk, index update ...) for the node.
        case transfer(Frame)
        /// A stream frame (open, data, close, credit, reset) for the session's streams.
        case stream(Frame)
        /// Something the peer sent was dropped because the session is not connected.
        case dropped(FrameType)
        /// The pairing ended without trust (declined, expired, refused).
        case pairingRejected(PairingStatus)
        /// The peer is refused (a key that is not the one expected): tell the user and fail
        /// a pairing in progress. The text is the reason.
        case refused(String)
        /// The session ends for this reason (kept as its close reason, shown to the user).
        case ended(String)
        /// The peer ended the session with a close frame (its code says whether to redial).
        case peerClosed(CloseCode)
        /// Close the transport (after sending any frames above).
        case closeTransport
    }

    package let role: Role
    package private(set) var state: State

    package init(role: Role) {
        self.role = role
        self.state = role == .initiator ? .awaitingPeerDecision : .awaitingLocalDecision
    }

    /// Feeds one event and returns what to do, in order.
    package mutating func handle(_ event: Event) -> [Action] {
        if state == .closed { return [] }
        switch event {
        case let .handshakeCompleted(standing):
            return handshakeCompleted(standing)
        case let .frame(frame):
            return received(frame)
        case .localAccept:
            guard role == .responder, state == .awaitingLocalDecision else { return [] }
            return [.pinPeer, .send(.pairing(.accepted))] + move(to: .connected)
        case .localDecline:
            guard role == .responder, state == .awaitingLocalDecision else { return [] }
            return [.send(.pairing(.declined)), .send(.close(code: .notPaired, reason: "invitation declined"))]
                + closeNow()
        case .invitationExpired:
            guard role == .responder, state == .awaitingLocalDecision else { return [] }
            return [.send(.pairing(.expired)), .send(.close(code: .timeout, reason: "invitation expired"))]
                + closeNow()
        case let .transportClosed(reason):
            return [.ended(reason)] + move(to: .closed)
        case .localDisconnect:
            return [.send(.close(code: .normal, reason: "disconnected by the user"))] + closeNow()
        case .localUnpair:
            return [.send(.close(code: .unpaired, reason: "unpaired by the user"))] + closeNow()
        case .localShutdown:
            return [.send(.close(code: .shuttingDown, reason: "the node is shutting down"))] + closeNow()
        }
    }

    private mutating func handshakeCompleted(_ standing: PeerStanding) -> [Action] {
        if case let .unreadable(why) = standing {
            return [.refused("refused: the paired peers cannot be read here: \(why)"),
                    .send(.close(code: .tryLater, reason: "the peer cannot read its paired peers now; try again later"))] + closeNow()
        }
        if case let .impersonation(why) = standing {
            return [.refused("refused: possible impersonation: \(why)"),
                    .send(.close(code: .impersonation, reason: "refused: possible impersonation"))] + closeNow()
        }
        switch role {
        case .initiator:
            return [.state(.awaitingPeerDecision)]
        case .responder:
            if standing == .paired {
                return [.send(.pairing(.accepted))] + move(to: .connected)
            }
            return [.send(.pairing(.pending)), .raiseInvitation, .state(.awaitingLocalDecision)]
        }
    }

    private mutating func received(_ frame: Frame) -> [Action] {
        switch frame {
        case let .ping(nonce):
            return [.send(.pong(nonce))]
        case .pong:
            return []
        case let .close(code, reason):
            return [.ended("peer closed the session: \(reason)"), .peerClosed(code)] + closeNow()
        case let .pairing(status):
            guard role == .initiator, state == .awaitingPeerDecision else { return [] }
            switch status {
            case .pending: return [.invitationPending]
            case .accepted: return [.pinPeer] + move(to: .connected)
            case .declined, .expired, .refused: return [.pairingRejected(status)] + closeNow()
            }
        case let .message(id, body):
            guard state == .connected else { return [.dropped(.message)] }
            return [.deliverMessage(id: id, body: body)]
        case let .certificate(der):
            guard state == .connected else { return [.dropped(.certificate)] }
            return [.pinCertificate(der)]
        case .streamOpen, .streamData, .streamClose, .streamCredit, .streamReset:
            guard state == .connected else { return [.dropped(frame.type)] }
            return [.stream(frame)]
        case .offer, .accept, .decline, .cancel, .done, .resent, .chunk, .chunkAck, .hashedChunk,
             .shareOffer, .shareAnswer, .indexUpdate, .indexAck, .blockRequest, .blockResponse, .blockDeltaRequest, .indexBlocks,
             .versionRequest, .versionResponse, .folderSelection, .chunkHave, .growingFile:
            guard state == .connected else { return [.dropped(frame.type)] }
            return [.transfer(frame)]
        }
    }

    private mutating func move(to next: State) -> [Action] {
        guard next != state else { return [] }
        state = next
        return [.state(next)]
    }

    private mutating func closeNow() -> [Action] {
        move(to: .closed) + [.closeTransport]
    }
}
