internal import COpenSSL

/// The node's certificate for Syncthing's relays and global discovery servers, which know a
/// device by the SHA-256 of the TLS client certificate it presents (its `CertificateID`).
///
/// It is derived from the node's X25519 identity key, so it needs no file of its own and is
/// the same on every start:
/// - the Ed25519 signing key's seed is the first 32 bytes of
///   HMAC-BLAKE2b-512(key: X25519 private key, "syncpeer tls identity v1");
/// - the certificate is X.509 v3, serial 1, issuer = subject = `O=syncpeer, CN=<the X25519
///   public key in 64 lower-case hex digits>`, valid from 2000-01-01 to 9999-12-31, signed
///   with that key (Ed25519 signatures are deterministic).
///
/// The common name binds the certificate to the Noise identity: its ID names one X25519 key,
/// so a peer reached by certificate ID proves it is that ID's node by completing the Noise
/// handshake with the key the certificate names (`boundKey(of:)`), which nobody else can.
package final class TLSIdentity: @unchecked Sendable {
    // @unchecked: immutable after init; the EVP_PKEY is only read (OpenSSL allows that from
    // several threads) and freed in deinit.
    /// The certificate in DER.
    package let certificate: [UInt8]
    /// Its ID (SHA-256 of `certificate`).
    package let id: CertificateID
    let privateKey: OpaquePointer

    static let derivationLabel = Array("syncpeer tls identity v1".utf8)
    static let organization = "syncpeer"
    /// A certificate a peer shows us is at most this large (ours are about 300 bytes).
    package static let maxCertificateSize = 2_048

    package init(keyPair: KeyPair) throws(CryptoError) {
        let seed = HMACBLAKE2b.authenticationCode(key: keyPair.privateKey, message: Self.derivationLabel)
        let key: OpaquePointer? = seed.withUnsafeBytes { bytes in
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, bytes.bindMemory(to: UInt8.self).baseAddress, 32)
        }
        guard let key else { throw .invalidKey("Ed25519 key for the TLS certificate") }
        guard let der = Self.selfSigned(key: key, commonName: keyPair.publicKey.description) else {
            EVP_PKEY_free(key)
            throw .unsupported("OpenSSL could not make the TLS certificate")
        }
        privateKey = key
        certificate = der
        id = CertificateID(certificate: der)
    }

    deinit { EVP_PKEY_free(privateKey) }

    private static func selfSigned(key: OpaquePointer, commonName: String) -> [UInt8]? {
        guard let x509 = X509_new() else { return nil }
        defer { X509_free(x509) }
        guard X509_set_version(x509, 2) == 1,
              ASN1_INTEGER_set(X509_get_serialNumber(x509), 1) == 1,
              ASN1_TIME_set_string(X509_getm_notBefore(x509), "000101000000Z") == 1,
              ASN1_TIME_set_string(X509_getm_notAfter(x509), "99991231235959Z") == 1,
              let name = X509_get_subject_name(x509),
              X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, organization, -1, -1, 0) == 1,
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1,
              X509_set_issuer_name(x509, name) == 1,
              X509_set_pubkey(x509, key) == 1,
              X509_sign(x509, key, nil) > 0
        else { return nil }
        return derBytes(of: x509)
    }

    static func derBytes(of x509: OpaquePointer) -> [UInt8]? {
        let length = i2d_X509(x509, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_X509(x509, &cursor)
        }
        return written == length ? der : nil
    }

    /// The X25519 key a syncpeer certificate names (its common name), or nil for a
    /// certificate that is not one of ours, damaged, or larger than `maxCertificateSize`.
    package static func boundKey(of certificate: [UInt8]) -> PublicKey? {
        guard certificate.count <= maxCertificateSize else { return nil }
        let parsed: OpaquePointer? = certificate.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let parsed else { return nil }
        defer { X509_free(parsed) }
        guard let name = X509_get_subject_name(parsed) else { return nil }
        let position = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        guard position >= 0, let entry = X509_NAME_get_entry(name, position),
              let data = X509_NAME_ENTRY_get_data(entry), let start = ASN1_STRING_get0_data(data) else { return nil }
        let length = Int(ASN1_STRING_length(data))
        guard length == 2 * PublicKey.byteCount else { return nil }
        let text = String(decoding: UnsafeBufferPointer(start: start, count: length), as: UTF8.self)
        guard let raw = bytes(fromHex: text) else { return nil }
        return try? PublicKey(raw)
    }
}
