public import Foundation
internal import SyncEngine
internal import PeerCrypto
internal import Synchronization

/// A peer as the API shows it, like Multipeer Connectivity's `MCPeerID`: the name people
/// see and the device ID that proves who it is (the hash of its key; names are not unique).
public struct PeerID: Hashable, Sendable, CustomStringConvertible {
    /// The name the peer chose (1–63 bytes); not an identity.
    public let displayName: String
    /// The canonical device ID, `XXXXXXX-XXXXXXX-…` (8 groups of 7).
    public let deviceID: String

    init(_ ref: PeerRef) {
        displayName = ref.name
        deviceID = ref.id.description
    }

    public var description: String { "\(displayName) (\(deviceID.prefix(7)))" }

    public static func == (a: PeerID, b: PeerID) -> Bool { a.deviceID == b.deviceID }
    public func hash(into hasher: inout Hasher) { hasher.combine(deviceID) }
}

/// How `Session.send` delivers a message.
public enum SendMode: Sendable {
    /// In order, never lost while the session lives (`MCSessionSendDataMode.reliable`).
    case reliable
    /// Never queued behind bulk data (files, streams, folder blocks) and dropped, not
    /// queued, when the link is saturated (`.unreliable`): for positions, presence, pings.
    case unreliable
}

/// The state of the session with one peer (`MCSessionState`).
public enum PeerState: String, Sendable {
    case notConnected, connecting, connected

    init(_ state: SessionState) {
        switch state {
        case .notConnected: self = .notConnected
        case .connecting: self = .connecting
        case .connected: self = .connected
        }
    }
}
