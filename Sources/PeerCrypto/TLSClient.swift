internal import COpenSSL
#if canImport(Glibc)
internal import Glibc
#endif

/// A TLS client over memory buffers (OpenSSL memory BIOs): the caller moves the bytes
/// between it and the socket (`feed`, `pendingOutput`), so sockets, deadlines and bounds
/// stay the network module's. Two ways to trust the server:
/// - pinned (TLS 1.3, our `TLSIdentity` as client certificate, no chain check): relays and
///   discovery servers are pinned by their certificate ID instead (`peerCertificate`), as
///   Syncthing pins them;
/// - verified (`verifyingHost`): the server's chain is checked against the system's CAs
///   (OpenSSL's default paths, so `SSL_CERT_FILE` / `SSL_CERT_DIR` apply) and its name or IP
///   address against `verifyingHost`, with SNI; for a relay pool, a plain HTTPS site.
///
/// Not thread-safe: one thread at a time (the owner serialises).
package final class TLSClient: @unchecked Sendable {
    // @unchecked: used by one thread at a time, which its owner (PeerNet's TLSStream) ensures.
    private let context: OpaquePointer
    private let connection: OpaquePointer
    private let input: OpaquePointer
    private let output: OpaquePointer
    /// The identity must outlive the context that uses its key.
    private let identity: TLSIdentity?

    package enum Progress: Equatable, Sendable {
        case done
        /// The handshake waits for bytes from the server (send `pendingOutput()` first).
        case needsInput
    }

    /// - Parameters:
    ///   - identity: the client certificate to present, if any.
    ///   - alpn: the application protocols to offer (a relay wants `bep-relay`).
    ///   - verifyingHost: check the server's chain against the system's CAs and its name
    ///     (a DNS name or an IP address) against this; nil: no check (the caller pins).
    package init(identity: TLSIdentity?, alpn: [String] = [], verifyingHost: String? = nil) throws(CryptoError) {
        self.identity = identity
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw Self.failure("creating a TLS context") }
        let identityUsed = identity.map { identity in
            identity.certificate.withUnsafeBufferPointer({
                SSL_CTX_use_certificate_ASN1(context, Int32($0.count), $0.baseAddress) }) == 1
                && SSL_CTX_use_PrivateKey(context, identity.privateKey) == 1
        } ?? true
        // A verified server may still speak TLS 1.2 (its chain, not a pin, is what we trust).
        let versionSet = verifyingHost == nil ? syncpeer_ssl_ctx_min_tls13(context) : syncpeer_ssl_ctx_min_tls12(context)
        guard versionSet == 1, identityUsed, let connection = SSL_new(context) else {
            SSL_CTX_free(context)
            throw Self.failure("setting up the TLS client")
        }
        if let host = verifyingHost {
            guard SSL_CTX_set_default_verify_paths(context) == 1, Self.expect(host, on: connection) else {
                SSL_free(connection)
                SSL_CTX_free(context)
                throw Self.failure("setting up the TLS client's certificate check for \(host.prefix(100))")
            }
            SSL_set_verify(connection, SSL_VERIFY_PEER, nil)
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        }
        guard let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            SSL_free(connection)
            SSL_CTX_free(context)
            throw Self.failure("making TLS buffers")
        }
        SSL_set_bio(connection, input, output)  // the connection owns both now
        SSL_set_connect_state(connection)
        if !alpn.isEmpty {
            var wire: [UInt8] = []
            for name in alpn where !name.utf8.isEmpty && name.utf8.count < 256 {
                wire.append(UInt8(name.utf8.count))
                wire += name.utf8
            }
            _ = wire.withUnsafeBufferPointer { SSL_set_alpn_protos(connection, $0.baseAddress, UInt32($0.count)) }
        }
        self.context = context
        self.connection = connection
        self.input = input
        self.output = output
    }

    /// The name (with SNI) or IP address the server's certificate must carry.
    private static func expect(_ host: String, on connection: OpaquePointer) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1 {
            return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(connection), host) == 1
        }
        return SSL_set1_host(connection, host) == 1 && syncpeer_ssl_set_sni(connection, host) == 1
    }

    deinit {
        SSL_free(connection)
        SSL_CTX_free(context)
    }

    /// Advances the handshake with what was fed so far.
    package func handshake() throws(CryptoError) -> Progress {
        let rc = SSL_do_handshake(connection)
        if rc == 1 { return .done }
        switch SSL_get_error(connection, rc) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .needsInput
        default:
            let verified = SSL_get_verify_result(connection)
            guard verified == Int(X509_V_OK) else {
                let reason = X509_verify_cert_error_string(verified).map { String(cString: $0) } ?? "code \(verified)"
                _ = Self.failure("")  // drops OpenSSL's queue of errors
                throw .tls("the server's certificate was refused: \(reason)")
            }
            throw Self.failure("TLS handshake")
        }
    }

    /// Hands bytes read from the socket to TLS.
    package func feed(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        _ = BIO_write(input, bytes.baseAddress, Int32(bytes.count))
    }

    /// The bytes TLS wants written to the socket (records, handshake messages, alerts).
    package func pendingOutput() -> [UInt8] {
        let count = Int(syncpeer_bio_pending(output))
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        let n = bytes.withUnsafeMutableBytes { BIO_read(output, $0.baseAddress, Int32(count)) }
        return n > 0 ? Array(bytes[0..<Int(n)]) : []
    }

    /// Encrypts `plaintext` (then send `pendingOutput()`).
    package func write(_ plaintext: [UInt8]) throws(CryptoError) {
        var offset = 0
        while offset < plaintext.count {
            let n = plaintext.withUnsafeBytes {
                SSL_write(connection, $0.baseAddress! + offset, Int32(min($0.count - offset, 16_384)))
            }
            guard n > 0 else { throw Self.failure("TLS write") }
            offset += Int(n)
        }
    }

    /// Decrypted bytes, at most `maxCount`: nil when TLS needs more input first, empty when
    /// the server closed the TLS session.
    package func read(maxCount: Int) throws(CryptoError) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: max(1, min(maxCount, 65_536)))
        let n = bytes.withUnsafeMutableBytes { SSL_read(connection, $0.baseAddress, Int32($0.count)) }
        if n > 0 { return Array(bytes[0..<Int(n)]) }
        switch SSL_get_error(connection, n) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return nil
        case SSL_ERROR_ZERO_RETURN: return []
        default: throw Self.failure("TLS read")
        }
    }

    /// The server's certificate (DER), once the handshake is done.
    package var peerCertificate: [UInt8]? {
        guard let x509 = SSL_get1_peer_certificate(connection) else { return nil }
        defer { X509_free(x509) }
        return TLSIdentity.derBytes(of: x509)
    }

    /// The application protocol the server chose, if any.
    package var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(connection, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    private static func failure(_ what: String) -> CryptoError {
        var reason = ""
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if reason.isEmpty {
                var text = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &text, text.count)
                reason = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
        }
        return .tls(reason.isEmpty ? what : "\(what): \(reason)")
    }
}
