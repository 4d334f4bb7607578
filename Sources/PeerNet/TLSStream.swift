package import PeerCrypto
internal import Synchronization

/// A TLS client session over a TCP connection, as a `ByteStream`: what a relay's
/// protocol connection and a global discovery server's HTTPS run in. The server is pinned by
/// its certificate ID (the handshake fails unless the server's certificate has that ID);
/// we present our `TLSIdentity`. A relay pool is an ordinary HTTPS site instead: its
/// certificate is checked against the system's CAs and its host name (`verifyingHost`).
///
/// TLS state is behind `tls`; the socket is read without holding it (one reader, as every
/// `ByteStream`), and writes are serialised by `writing` so records go out in order.
package final class TLSStream: ByteStream {
    private let connection: TCPConnection
    private let tls: Mutex<TLSClient>
    private let writing = Mutex<Void>(())
    package let remoteDescription: String
    /// The server's certificate ID (checked against the pin).
    package let serverID: CertificateID
    /// The application protocol the server chose (`bep-relay` for a relay), if any.
    package let negotiatedProtocol: String?

    /// Handshakes over `connection` before `deadline`; fails unless the server's
    /// certificate is `expected` (when given), or when `verifyingHost` is given, unless its
    /// chain and name check out. Closes the connection on failure.
    package init(over connection: TCPConnection, identity: TLSIdentity?, expected: CertificateID?,
                alpn: [String] = [], verifyingHost: String? = nil, deadline: ContinuousClock.Instant) throws(NetError) {
        self.connection = connection
        remoteDescription = connection.remoteDescription
        let client: TLSClient
        do {
            client = try TLSClient(identity: identity, alpn: alpn, verifyingHost: verifyingHost)
            while try client.handshake() == .needsInput {
                let out = client.pendingOutput()
                if !out.isEmpty { try connection.write(out) }
                let bytes = try connection.read(maxCount: 16_384, deadline: deadline)
                guard !bytes.isEmpty else { throw NetError.closed("\(connection.remoteDescription) closed the TLS handshake") }
                bytes.withUnsafeBytes { client.feed($0) }
            }
            let out = client.pendingOutput()
            if !out.isEmpty { try connection.write(out) }
        } catch let error as NetError {
            connection.close()
            throw error
        } catch {
            connection.close()
            throw .handshakeFailed("\(connection.remoteDescription): \(error)")
        }
        guard let certificate = client.peerCertificate, certificate.count <= TLSIdentity.maxCertificateSize else {
            connection.close()
            throw .handshakeFailed("\(connection.remoteDescription) showed no usable TLS certificate")
        }
        let id = CertificateID(certificate: certificate)
        if let expected, id != expected {
            connection.close()
            throw .handshakeFailed("\(connection.remoteDescription) is \(id), not the server \(expected) we were told to expect")
        }
        serverID = id
        negotiatedProtocol = client.negotiatedProtocol
        tls = Mutex(client)
    }

    package func read(maxCount: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8] {
        while true {
            let plain: [UInt8]?
            do { plain = try tls.withLock { client throws(CryptoError) in try client.read(maxCount: maxCount) } } catch {
                throw .protocolViolation("\(remoteDescription): \(error)")
            }
            if let plain { return plain }
            let bytes = try connection.read(maxCount: 16_384, deadline: deadline)
            if bytes.isEmpty { return [] }
            tls.withLock { client in bytes.withUnsafeBytes { client.feed($0) } }
            try flushPending()
        }
    }

    package func write(_ bytes: [UInt8]) throws(NetError) {
        try writing.withLock { _ throws(NetError) in
            let out: [UInt8]
            do {
                out = try tls.withLock { client throws(CryptoError) in
                    try client.write(bytes)
                    return client.pendingOutput()
                }
            } catch {
                throw .protocolViolation("\(remoteDescription): \(error)")
            }
            try connection.write(out)
        }
    }

    /// Sends what TLS produced while reading (a key update's answer), in order with writes.
    private func flushPending() throws(NetError) {
        try writing.withLock { _ throws(NetError) in
            let out = tls.withLock { $0.pendingOutput() }
            if !out.isEmpty { try connection.write(out) }
        }
    }

    package func shutdownWrite() { connection.shutdownWrite() }
    package func close() { connection.close() }
}
