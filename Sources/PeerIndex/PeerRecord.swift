/// A device this node knows, as stored in the `peers` table.
package struct PeerRecord: Sendable, Equatable {
    /// How far we trust a device.
    package enum Trust: String, Sendable, CaseIterable {
        /// Pairing accepted: its key is pinned and it reconnects without prompts.
        case paired
        /// An invitation is open and not answered yet.
        case pending
        /// The user declined an invitation (it may ask again).
        case declined
        /// Never accept anything from this device.
        case blocked
    }

    /// Canonical device ID (56 characters, A–Z and 2–7, no dashes).
    package var deviceID: String
    /// Display name last seen (at most 63 bytes of UTF-8); not an identity.
    package var name: String
    /// Pinned X25519 static public key, 32 bytes.
    package var publicKey: [UInt8]
    package var trust: Trust
    /// Accept this peer's files (transfers, streams) without asking.
    package var autoAccept: Bool
    /// Accept this peer's share offers (join its new folders) without asking: a switch of
    /// its own, off unless turned on (schema 0007).
    package var autoAcceptFolders: Bool
    /// When we first heard of the device (unix ms). Kept by `upsertPeer` for an existing peer.
    package var firstSeen: Int64
    /// Last authenticated contact (unix ms); nil if never connected.
    package var lastSeen: Int64?
    /// When the pairing was accepted (unix ms); nil if never paired.
    package var pairedAt: Int64?
    /// Known "host:port" addresses, last known first.
    package var addresses: [String]

    package init(
        deviceID: String, name: String, publicKey: [UInt8], trust: Trust, autoAccept: Bool = false, autoAcceptFolders: Bool = false,
        firstSeen: Int64, lastSeen: Int64? = nil, pairedAt: Int64? = nil, addresses: [String] = []
    ) {
        self.deviceID = deviceID
        self.name = name
        self.publicKey = publicKey
        self.trust = trust
        self.autoAccept = autoAccept
        self.autoAcceptFolders = autoAcceptFolders
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.pairedAt = pairedAt
        self.addresses = addresses
    }
}
