/// The certificate IDs of paired peers (schema 0011): what relays and global discovery
/// servers know each peer by. Raw 32-byte hashes; PeerCrypto's `CertificateID` gives the text.
extension NodeIndex {
    /// Pins `certificateID` (32 bytes) for the peer `deviceID`, replacing an older one.
    package func setPeerCertificate(deviceID: String, certificateID: [UInt8], learnedAt: Int64) throws(IndexError) {
        try write { db in
            try db.execute(
                """
                INSERT INTO peer_certificates (device_id, certificate_id, learned_at) VALUES (?, ?, ?)
                ON CONFLICT (device_id) DO UPDATE SET certificate_id = excluded.certificate_id, learned_at = excluded.learned_at
                """,
                [.text(deviceID), .blob(certificateID), .integer(learnedAt)])
        }
    }

    /// The pinned certificate ID of `deviceID`, or nil when it never sent one.
    package func peerCertificate(deviceID: String) throws(IndexError) -> [UInt8]? {
        try read { db in
            try db.query("SELECT certificate_id FROM peer_certificates WHERE device_id = ?", [.text(deviceID)])
                .first.map { row throws(IndexError) in try row.blob("certificate_id") }
        }
    }
}
