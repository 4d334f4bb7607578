package import PeerCrypto

/// Who this node is: its long-term key pair, the device ID derived from it, and the
/// display name people see.
package struct Identity: Sendable {
    package let keyPair: KeyPair
    package let deviceID: DeviceID
    package var displayName: String

    package init(keyPair: KeyPair, displayName: String) {
        self.keyPair = keyPair
        self.deviceID = DeviceID(publicKey: keyPair.publicKey)
        self.displayName = displayName
    }

    /// The certificate relays and global discovery servers know this node by, derived from
    /// its key (`TLSIdentity`; its ID is `certificateID`).
    package func tlsIdentity() throws(EngineError) -> TLSIdentity {
        do { return try TLSIdentity(keyPair: keyPair) } catch {
            throw .invalidArgument("cannot make the TLS certificate: \(error.description)")
        }
    }
}
