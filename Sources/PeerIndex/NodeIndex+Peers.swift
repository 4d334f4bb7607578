internal import FoundationEssentials

/// Peers: the pinned keys and what we know about each device.
extension NodeIndex {
    /// How many addresses a peer keeps; the oldest fall off the end.
    package static let maxRememberedAddresses = 8

    private static let peerColumns =
        "device_id, name, public_key, trust, auto_accept, first_seen, last_seen, paired_at, addresses, auto_accept_folders"

    /// Inserts `peer`, or replaces the stored record with the same device ID
    /// (keeping the stored `firstSeen`). CHECK constraints reject a key that is not
    /// 32 bytes, a malformed device ID and a name over 63 bytes.
    package func upsertPeer(_ peer: PeerRecord) throws(IndexError) {
        let addresses = try Self.encodeAddresses(peer.addresses, path: path)
        try write { db in
            try db.execute(
                """
                INSERT INTO peers (\(Self.peerColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (device_id) DO UPDATE SET
                    name = excluded.name, public_key = excluded.public_key, trust = excluded.trust,
                    auto_accept = excluded.auto_accept, auto_accept_folders = excluded.auto_accept_folders, last_seen = excluded.last_seen,
                    paired_at = excluded.paired_at, addresses = excluded.addresses
                """,
                [.text(peer.deviceID), .text(peer.name), .blob(peer.publicKey), .text(peer.trust.rawValue),
                 SQLValue(peer.autoAccept), .integer(peer.firstSeen), SQLValue(peer.lastSeen),
                 SQLValue(peer.pairedAt), .text(addresses), SQLValue(peer.autoAcceptFolders)])
        }
    }

    /// The peer with `deviceID`, or nil.
    package func peer(deviceID: String) throws(IndexError) -> PeerRecord? {
        try read { db in
            try db.query("SELECT \(Self.peerColumns) FROM peers WHERE device_id = ?", [.text(deviceID)])
                .first.map(Self.peerRecord)
        }
    }

    /// All peers, by name then device ID.
    package func peers() throws(IndexError) -> [PeerRecord] {
        try read { db in
            try db.query("SELECT \(Self.peerColumns) FROM peers ORDER BY name, device_id").map(Self.peerRecord)
        }
    }

    /// Peers whose display name is exactly `name` (names are not unique), by device ID.
    package func peers(named name: String) throws(IndexError) -> [PeerRecord] {
        try read { db in
            try db.query("SELECT \(Self.peerColumns) FROM peers WHERE name = ? ORDER BY device_id", [.text(name)])
                .map(Self.peerRecord)
        }
    }

    /// Forgets a peer, its folder memberships and its transfers. Returns whether it existed.
    @discardableResult
    package func deletePeer(deviceID: String) throws(IndexError) -> Bool {
        try write { db in
            try db.execute("DELETE FROM peers WHERE device_id = ?", [.text(deviceID)])
            return db.changes > 0
        }
    }

    /// Records an authenticated contact: `last_seen` becomes `time` (default now) and
    /// `address`, if given, moves to the front of the known addresses.
    package func updateLastSeen(deviceID: String, at time: Int64? = nil, address: String? = nil) throws(IndexError) {
        let time = time ?? clock()
        let path = self.path
        try write { db in
            guard let row = try db.query("SELECT addresses FROM peers WHERE device_id = ?", [.text(deviceID)]).first else {
                throw IndexError(kind: .notFound, operation: "update last seen", path: path,
                                 message: "no peer with device ID \(deviceID)")
            }
            var addresses = try Self.decodeAddresses(try row.string("addresses"), path: path)
            if let address {
                addresses.removeAll { $0 == address }
                addresses.insert(address, at: 0)
                addresses = Array(addresses.prefix(Self.maxRememberedAddresses))
            }
            try db.execute("UPDATE peers SET last_seen = ?, addresses = ? WHERE device_id = ?",
                           [.integer(time), .text(try Self.encodeAddresses(addresses, path: path)), .text(deviceID)])
        }
    }

    private static func peerRecord(_ row: Row) throws -> PeerRecord {
        let trustText = try row.string("trust")
        guard let trust = PeerRecord.Trust(rawValue: trustText) else {
            throw IndexError(kind: .unexpectedValue, operation: "read peer", path: row.path,
                             message: "unknown trust value \(trustText)")
        }
        return PeerRecord(
            deviceID: try row.string("device_id"), name: try row.string("name"),
            publicKey: try row.blob("public_key"), trust: trust, autoAccept: try row.bool("auto_accept"),
            autoAcceptFolders: try row.bool("auto_accept_folders"),
            firstSeen: try row.int64("first_seen"), lastSeen: try row.optionalInt64("last_seen"),
            pairedAt: try row.optionalInt64("paired_at"),
            addresses: try decodeAddresses(try row.string("addresses"), path: row.path))
    }

    private static func encodeAddresses(_ addresses: [String], path: String) throws(IndexError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(addresses), as: UTF8.self)
        } catch {
            throw IndexError(kind: .unexpectedValue, operation: "encode addresses", path: path, message: "\(error)")
        }
    }

    private static func decodeAddresses(_ json: String, path: String) throws(IndexError) -> [String] {
        do {
            return try JSONDecoder().decode([String].self, from: Data(json.utf8))
        } catch {
            throw IndexError(kind: .unexpectedValue, operation: "read peer addresses", path: path,
                             message: "addresses are not a JSON array of strings: \(json)")
        }
    }
}
