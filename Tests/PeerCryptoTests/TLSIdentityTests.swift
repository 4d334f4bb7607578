import PeerCrypto
import Testing

/// The certificate relays and discovery servers know a node by.
struct TLSIdentityTests {
    @Test func theCertificateIsDerivedFromTheIdentityKeyAndNamesIt() throws {
        let key = KeyPair.generate()
        let first = try TLSIdentity(keyPair: key)
        let again = try TLSIdentity(keyPair: KeyPair(privateKey: key.privateKey))
        // Same key, same certificate, same ID: nothing to keep on disk, stable across restarts.
        #expect(first.certificate == again.certificate)
        #expect(first.id == again.id)
        #expect(try TLSIdentity(keyPair: .generate()).id != first.id)
        // The certificate binds the Noise key: its common name is the X25519 public key.
        #expect(TLSIdentity.boundKey(of: first.certificate) == key.publicKey)
        #expect(TLSIdentity.boundKey(of: Array(first.certificate.dropLast(3))) == nil)
    }

    @Test func certificateIDsUseSyncthingsCheckCharacters() throws {
        // Known answers of Syncthing's luhn32 (check character after 13 characters).
        let id = try TLSIdentity(keyPair: .generate()).id
        #expect(try CertificateID(parsing: id.description) == id)
        #expect(id.description.count == 63)
        var typo = Array(id.description)
        typo[3] = typo[3] == "A" ? "B" : "A"
        #expect(throws: CryptoError.self) { try CertificateID(parsing: String(typo)) }
        // Syncthing's public discovery servers' ID parses (a real one, from Syncthing's defaults).
        #expect(throws: Never.self) { try CertificateID(parsing: "LYXKCHX-VI3NYZR-ALCJBHF-WMZYSPK-QG6QJA3-MPFYMSO-U56GTUK-NA2MIAW") }
    }
}
