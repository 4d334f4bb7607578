package import PeerNet

/// Something that happened in the node, for the CLI to render and for scripts (NDJSON via
/// `syncpeer events`). Each case carries its own typed payload; in JSON an event is one
/// object, its payload's fields plus `"event": KIND` (docs/JSON.md lists each kind's fields).
/// Fields that do not apply are left out. `time` is milliseconds since 1970.
package enum NodeEvent: Sendable, Equatable {
    /// The node listens.
    case listening(Listening)
    /// A session changed state.
    case state(SessionChange)
    /// A peer invites us.
    case invitation(Invitation)
    /// An invitation ended (accepted, declined, expired, dropped).
    case invitationClosed(InvitationClosed)
    /// Our invitation reached the peer, which now shows the same code.
    case invitationPending(CodeShown)
    /// A peer was pinned.
    case paired(CodeShown)
    /// Pairing ended without trust.
    case pairingRejected(PairingRejected)
    /// A message arrived.
    case message(Message)
    /// A connection was refused (impersonation), or a peer's block requests for data not
    /// shared with it piled up.
    case refused(Refusal)
    /// A frame from a peer that is not (yet) trusted was dropped.
    case dropped(Refusal)
    /// An error on a session, the listener, a transfer or a folder.
    case error(Failure)
    /// A peer offers files.
    case offer(Offer)
    /// A peer invites us to share a folder.
    case shareOffer(ShareOffer)
    /// A shared folder changed state or hit an error.
    case folder(FolderChange)
    /// A file of a shared folder is being pulled, was pulled, failed, or met a conflict.
    case file(FileChange)
    /// A transfer started, progressed (rate-limited) or ended.
    case transfer(TransferInfo)
    /// Discovery found a peer nearby.
    case found(Found)
    /// A discovered peer left (goodbye or expiry).
    case lost(Lost)
    /// Our service is published under this instance name.
    case registered(Registered)
    /// Advertising was switched on or off.
    case visibility(VisibilityChange)

    /// The kinds, as the `event` field names them.
    package enum Kind: String, Sendable, Codable, CaseIterable {
        case listening, state, invitation
        case invitationClosed = "invitation_closed"
        case invitationPending = "invitation_pending"
        case paired
        case pairingRejected = "pairing_rejected"
        case message, refused, dropped, error, offer
        case shareOffer = "share_offer"
        case folder, file, transfer, found, lost, registered, visibility
    }

    // MARK: Payloads

    package struct Listening: Sendable, Equatable, Codable {
        package var address: String
        package var time: Int64
    }

    package struct SessionChange: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var state: SessionState
        /// Where it connected from (`connecting`).
        package var address: String?
        /// Why the session ended (`notConnected`).
        package var reason: String?
        package var time: Int64
    }

    package struct Invitation: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var invitation: String
        /// The short authentication code both ends show.
        package var code: String
        package var context: String?
        package var address: String
        package var time: Int64
    }

    package struct InvitationClosed: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var invitation: String?
        /// accepted, declined, expired, dropped.
        package var outcome: String
        package var time: Int64
    }

    /// The code both ends show (`invitation_pending`, `paired`).
    package struct CodeShown: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var code: String
        package var time: Int64
    }

    package struct PairingRejected: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var outcome: String
        package var time: Int64
    }

    package struct Message: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var id: UInt64
        package var text: String
        package var time: Int64
    }

    /// A refused or dropped peer (`refused`, `dropped`).
    package struct Refusal: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var reason: String
        /// The folder its requests were about, and its label.
        package var folder: String?
        package var name: String?
        package var time: Int64
    }

    package struct Failure: Sendable, Equatable, Codable {
        package var peer: PeerRef?
        package var reason: String
        package var time: Int64
    }

    package struct Offer: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var transfer: String
        package var name: String
        package var total: Int64
        package var files: Int
        package var time: Int64
    }

    package struct ShareOffer: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var folder: String
        /// The folder's label.
        package var name: String
        package var time: Int64
    }

    package struct FolderChange: Sendable, Equatable, Codable {
        package var folder: String
        /// The peer that changed it (`unshared`).
        package var peer: PeerRef?
        /// The folder's label.
        package var name: String?
        package var state: FolderState?
        package var path: String?
        package var reason: String?
        package var time: Int64
    }

    /// One file of a shared folder, as a pull moves it (`file`).
    package struct FileChange: Sendable, Equatable, Codable {
        package var folder: String
        /// The folder's label.
        package var name: String
        /// The file's path in the folder.
        package var path: String
        package var state: FileSyncState
        /// `syncing`: bytes to fetch from peers; `pulled`: the file's size.
        package var bytes: Int64?
        /// `syncing`: the file's size.
        package var total: Int64?
        /// `conflict`: the path (in the folder) the local version was kept under.
        package var copy: String?
        /// `failed`: why, and when it is tried again.
        package var reason: String?
        package var time: Int64
    }

    /// What a pull did to one file.
    package enum FileSyncState: String, Sendable, Equatable, Codable {
        case syncing, pulled, failed, conflict
    }

    package struct Found: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var instance: String
        package var address: String?
        package var addresses: [String]
        package var port: Int
        package var info: [String: String]
        package var time: Int64
    }

    package struct Lost: Sendable, Equatable, Codable {
        package var peer: PeerRef
        package var instance: String
        package var time: Int64
    }

    package struct Registered: Sendable, Equatable, Codable {
        package var instance: String
        /// Why it is not our display name.
        package var reason: String?
        package var time: Int64
    }

    package struct VisibilityChange: Sendable, Equatable, Codable {
        /// visible or invisible.
        package var state: String
        package var time: Int64
    }
}

/// A transfer as events, results (`send`, `receive`, `cancel`, `accept` of an offer) and
/// `transfers` show it.
package struct TransferInfo: Sendable, Equatable, Codable {
    /// The transfer ID (nil while the sender still prepares its offer).
    package var transfer: String?
    package var direction: Direction
    /// The other end (nil for a record whose peer is gone).
    package var peer: PeerRef?
    package var name: String
    package var state: TransferState
    /// Bytes done: acknowledged (sender) or verified (receiver).
    package var bytes: Int64?
    package var total: Int64?
    package var files: Int?
    /// Bytes per second, smoothed.
    package var rate: Double?
    /// Seconds to go at the current rate.
    package var eta: Double?
    /// Where the receiver put the file or folder.
    package var path: String?
    /// Bytes sent more than once (resume and retries).
    package var resent: Int64?
    /// Bytes the receiver held already from a cut transfer and were not sent again (a
    /// Magic Wormhole transfer between syncpeers, `resume-v1`).
    package var resumed: Int64?
    /// Why it paused, failed or ended.
    package var reason: String?
    package var time: Int64

    package enum Direction: String, Sendable, Codable {
        case send, receive
    }
}

extension NodeEvent {
    package var kind: Kind {
        switch self {
        case .listening: .listening
        case .state: .state
        case .invitation: .invitation
        case .invitationClosed: .invitationClosed
        case .invitationPending: .invitationPending
        case .paired: .paired
        case .pairingRejected: .pairingRejected
        case .message: .message
        case .refused: .refused
        case .dropped: .dropped
        case .error: .error
        case .offer: .offer
        case .shareOffer: .shareOffer
        case .folder: .folder
        case .file: .file
        case .transfer: .transfer
        case .found: .found
        case .lost: .lost
        case .registered: .registered
        case .visibility: .visibility
        }
    }

    /// The peer the event is about, if any.
    package var peer: PeerRef? {
        switch self {
        case .listening, .registered, .visibility, .file: nil
        case let .state(e): e.peer
        case let .invitation(e): e.peer
        case let .invitationClosed(e): e.peer
        case let .invitationPending(e), let .paired(e): e.peer
        case let .pairingRejected(e): e.peer
        case let .message(e): e.peer
        case let .refused(e), let .dropped(e): e.peer
        case let .error(e): e.peer
        case let .offer(e): e.peer
        case let .shareOffer(e): e.peer
        case let .folder(e): e.peer
        case let .transfer(e): e.peer
        case let .found(e): e.peer
        case let .lost(e): e.peer
        }
    }

    /// The event as a JSON value: the shape the control socket and `--json` output use.
    package var json: JSONValue { JSONValue(encoding: self) }
}

extension NodeEvent: Codable {
    private enum Key: String, CodingKey { case event }

    package init(from decoder: any Decoder) throws {
        let kind = try decoder.container(keyedBy: Key.self).decode(Kind.self, forKey: .event)
        switch kind {
        case .listening: self = .listening(try Listening(from: decoder))
        case .state: self = .state(try SessionChange(from: decoder))
        case .invitation: self = .invitation(try Invitation(from: decoder))
        case .invitationClosed: self = .invitationClosed(try InvitationClosed(from: decoder))
        case .invitationPending: self = .invitationPending(try CodeShown(from: decoder))
        case .paired: self = .paired(try CodeShown(from: decoder))
        case .pairingRejected: self = .pairingRejected(try PairingRejected(from: decoder))
        case .message: self = .message(try Message(from: decoder))
        case .refused: self = .refused(try Refusal(from: decoder))
        case .dropped: self = .dropped(try Refusal(from: decoder))
        case .error: self = .error(try Failure(from: decoder))
        case .offer: self = .offer(try Offer(from: decoder))
        case .shareOffer: self = .shareOffer(try ShareOffer(from: decoder))
        case .folder: self = .folder(try FolderChange(from: decoder))
        case .file: self = .file(try FileChange(from: decoder))
        case .transfer: self = .transfer(try TransferInfo(from: decoder))
        case .found: self = .found(try Found(from: decoder))
        case .lost: self = .lost(try Lost(from: decoder))
        case .registered: self = .registered(try Registered(from: decoder))
        case .visibility: self = .visibility(try VisibilityChange(from: decoder))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        // The payload's fields and the kind share one object.
        switch self {
        case let .listening(e): try e.encode(to: encoder)
        case let .state(e): try e.encode(to: encoder)
        case let .invitation(e): try e.encode(to: encoder)
        case let .invitationClosed(e): try e.encode(to: encoder)
        case let .invitationPending(e), let .paired(e): try e.encode(to: encoder)
        case let .pairingRejected(e): try e.encode(to: encoder)
        case let .message(e): try e.encode(to: encoder)
        case let .refused(e), let .dropped(e): try e.encode(to: encoder)
        case let .error(e): try e.encode(to: encoder)
        case let .offer(e): try e.encode(to: encoder)
        case let .shareOffer(e): try e.encode(to: encoder)
        case let .folder(e): try e.encode(to: encoder)
        case let .file(e): try e.encode(to: encoder)
        case let .transfer(e): try e.encode(to: encoder)
        case let .found(e): try e.encode(to: encoder)
        case let .lost(e): try e.encode(to: encoder)
        case let .registered(e): try e.encode(to: encoder)
        case let .visibility(e): try e.encode(to: encoder)
        }
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(kind, forKey: .event)
    }
}
