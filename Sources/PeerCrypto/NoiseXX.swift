/// Factories for the handshakes syncpeer itself runs.
public enum NoiseHandshake {
    /// The protocol of syncpeer's device-to-device channel.
    public static let xxProtocolName = "Noise_XX_25519_ChaChaPoly_BLAKE2b"

    /// A `Noise_XX_25519_ChaChaPoly_BLAKE2b` handshake: both sides send their static key
    /// encrypted, so neither needs to know the other's key beforehand; the caller checks
    /// `transport.remoteStaticKey` (e.g. against a device ID) once it completes.
    ///
    /// Three messages: initiator → responder → initiator.
    public static func xx(role: NoiseRole, prologue: [UInt8] = [], staticKey: KeyPair) -> NoiseHandshakeState {
        // XX with a static key and no pre-message keys or psks is always valid, so the
        // initialiser cannot throw here.
        try! NoiseHandshakeState(protocolName: xxProtocolName, role: role, prologue: prologue, staticKeyPair: staticKey)
    }
}
