internal import Foundation

/// Something that happened in the node, for the CLI to render and for scripts (NDJSON via
/// `syncpeer events`). Fields that do not apply are left out of the JSON.
public struct NodeEvent: Sendable, Equatable, Codable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// The node listens (address).
        case listening
        /// A session changed state (peer, state, reason when closed).
        case state
        /// A peer invites us (invitation, peer, code, context, address).
        case invitation
        /// An invitation ended (invitation, outcome: accepted / declined / expired / cancelled).
        case invitationClosed = "invitation_closed"
        /// Our invitation reached the peer, which now shows the same code (peer, code).
        case invitationPending = "invitation_pending"
        /// A peer was pinned (peer).
        case paired
        /// Pairing ended without trust (peer, outcome).
        case pairingRejected = "pairing_rejected"
        /// A message arrived (peer, id, text).
        case message
        /// A connection was refused (peer, reason): impersonation, not paired...; or a peer's
        /// block requests for data not shared with it piled up (peer, folder, name, reason).
        case refused
        /// A frame from a peer that is not (yet) trusted was dropped (peer, reason).
        case dropped
        /// An error on a session or the listener (peer?, reason).
        case error
        /// A peer offers files (transfer, peer, name, total, files).
        case offer
        /// A peer invites us to share a folder (folder, name = label, peer).
        case shareOffer = "share_offer"
        /// A shared folder changed state or hit an error (folder, name, state, path, reason).
        case folder
        /// A transfer changed: started, progressed (rate-limited), or ended (transfer,
        /// direction, peer, name, state, bytes, total, rate, eta, path, reason, resent).
        case transfer
        /// Discovery found a peer nearby (peer, instance, address, addresses, port, info).
        case found
        /// A discovered peer left: goodbye or expiry (peer, instance).
        case lost
        /// Our service is published under this instance name (instance; reason when renamed).
        case registered
        /// Advertising was switched on or off (state: visible / invisible).
        case visibility
    }

    /// A peer as events show it.
    public typealias Peer = PeerRef

    public var event: Kind
    public var peer: Peer?
    public var state: String?
    public var invitation: String?
    /// The short authentication code both ends show while pairing.
    public var code: String?
    public var context: String?
    public var address: String?
    public var outcome: String?
    public var id: UInt64?
    public var text: String?
    public var reason: String?
    /// A shared folder's ID.
    public var folder: String?
    /// Transfer fields.
    public var transfer: String?
    public var direction: String?
    public var name: String?
    public var bytes: Int64?
    public var total: Int64?
    public var files: Int?
    /// Bytes per second, smoothed.
    public var rate: Double?
    /// Seconds to go at the current rate.
    public var eta: Double?
    /// Where a received file or folder was put.
    public var path: String?
    /// Bytes sent more than once (resume and retries), on the sending side.
    public var resent: Int64?
    /// Discovery: the instance label ("bob", "bob (2)").
    public var instance: String?
    /// Discovery: every "host:port" the peer was found at.
    public var addresses: [String]?
    /// Discovery: the advertised TCP port.
    public var port: Int?
    /// Discovery: the peer's discovery info (TXT pairs other than id and v).
    public var info: [String: String]?
    /// Milliseconds since 1970.
    public var time: Int64

    public init(_ event: Kind, peer: Peer? = nil, state: String? = nil, invitation: String? = nil, code: String? = nil,
                context: String? = nil, address: String? = nil, outcome: String? = nil, id: UInt64? = nil,
                text: String? = nil, transfer: String? = nil, direction: String? = nil, name: String? = nil,
                bytes: Int64? = nil, total: Int64? = nil, files: Int? = nil, rate: Double? = nil, eta: Double? = nil,
                path: String? = nil, resent: Int64? = nil, reason: String? = nil, instance: String? = nil,
                addresses: [String]? = nil, port: Int? = nil, info: [String: String]? = nil, time: Int64) {
        self.transfer = transfer
        self.direction = direction
        self.name = name
        self.bytes = bytes
        self.total = total
        self.files = files
        self.rate = rate
        self.eta = eta
        self.path = path
        self.resent = resent
        self.event = event
        self.peer = peer
        self.state = state
        self.invitation = invitation
        self.code = code
        self.context = context
        self.address = address
        self.outcome = outcome
        self.id = id
        self.text = text
        self.reason = reason
        self.instance = instance
        self.addresses = addresses
        self.port = port
        self.info = info
        self.time = time
    }
}

extension NodeEvent {
    /// The event as a JSON value: the shape the control socket and `--json` output use.
    public var json: JSONValue { JSONValue(encoding: self) }
}
