internal import Dispatch
internal import PeerCrypto
internal import PeerIndex
internal import PeerNet
internal import PeerWire

/// Paired peers tell each other their TLS certificate inside the Noise session (a
/// `certificate` frame, to peers whose hello lists `tls-certificate`), so each knows what
/// relays and global discovery servers call the other. A certificate must name the key the
/// peer completed the handshake with (`TLSIdentity.boundKey`): a peer cannot pin another
/// device's certificate ID on us.
extension ConnectionService {
    static let certificateFeature = "tls-certificate"

    /// Sends our certificate on a session that just connected (on `queue`).
    func sendCertificate(on session: Session) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard session.channel.remoteHello.features.contains(Self.certificateFeature), let tls = tlsIdentity else { return }
        session.send([.certificate(tls.certificate)])
    }

    /// Checks and pins a paired peer's certificate ID; false (the session ended for a
    /// protocol violation) when the certificate is not the peer's.
    func pinCertificate(_ der: [UInt8], from session: Session) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        guard TLSIdentity.boundKey(of: der) == session.publicKey else {
            endForViolation(session, "a certificate that does not name the peer's key")
            return false
        }
        if let expected = session.expectedCertificate, CertificateID(certificate: der) != expected {
            // Paired by certificate ID, but this is another node: undo the pairing.
            undoPairing(of: session.peer, device: session.deviceKey, pairedAt: nil)
            endForViolation(session, "its certificate ID is not \(expected), the one it was paired by")
            return false
        }
        do {
            try index.setPeerCertificate(deviceID: session.deviceKey, certificateID: CertificateID(certificate: der).hash, learnedAt: now())
        } catch {
            emitError(session.peer, "cannot store \(session.peer.name)'s certificate ID: \(error.description)")
        }
        return true
    }

    /// Tries of one undo of a pairing, the first included.
    static let undoAttempts = 5

    /// Removes the pairing of `device`, a node paired by a certificate ID that turned out
    /// not to be its own. A removal that fails is reported and tried again (`undoAttempts`
    /// tries, `undoRetry` apart), as long as the pairing is the one it was then (`pairedAt`:
    /// a pairing made again since is the user's).
    func undoPairing(of peer: PeerRef, device: String, pairedAt: Int64?, attempt: Int = 1) {
        dispatchPrecondition(condition: .onQueue(queue))
        do throws(IndexError) {
            guard let record = try index.peer(deviceID: device), pairedAt == nil || record.pairedAt == pairedAt else { return }
            do throws(IndexError) { _ = try index.deletePeer(deviceID: device) } catch {
                let last = attempt >= Self.undoAttempts
                emitError(peer, "\(peer.name) is not the node its certificate ID was paired by, but its pairing cannot be removed: "
                    + "\(error.description); " + (last ? "giving up: unpair it" : "trying again in \(undoRetry)"))
                guard !last else { return }
                queue.asyncAfter(deadline: .now() + .milliseconds(Int(undoRetry / .milliseconds(1)))) { [self] in
                    undoPairing(of: peer, device: device, pairedAt: record.pairedAt, attempt: attempt + 1)
                }
            }
        } catch {
            emitError(peer, "\(peer.name) is not the node its certificate ID was paired by, but its pairing cannot be read "
                + "to remove it (unpair it): \(error.description)")
        }
    }

    /// The pinned certificate ID of a paired peer, if it sent one.
    func certificateID(of device: String) throws(IndexError) -> CertificateID? {
        try index.peerCertificate(deviceID: device).flatMap { CertificateID(hash: $0) }
    }

    /// The certificate ID to dial `device` by through relays and discovery servers. One the
    /// index cannot read only skips those dials this time (the next redial attempt reads it
    /// again; direct addresses are still dialled): nothing is decided on the missing answer.
    func dialCertificateID(of device: String) -> CertificateID? {
        try? certificateID(of: device)
    }
}
