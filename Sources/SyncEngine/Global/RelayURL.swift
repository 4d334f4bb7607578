internal import FoundationEssentials
package import PeerCrypto
package import PeerNet

/// `relay://HOST:PORT/?id=RELAY-CERTIFICATE-ID` (as `strelaysrv` prints it, other query
/// parameters ignored): the relay, pinned by its certificate ID.
package enum RelayURL {
    package static func parse(_ text: String) throws(EngineError) -> RelayEndpoint {
        func bad(_ why: String) -> EngineError {
            .invalidArgument("relay '\(text.prefix(200))': \(why) (expected relay://HOST:PORT/?id=RELAY-ID)")
        }
        guard text.utf8.count <= 1_024, let url = URLComponents(string: text), url.scheme == "relay",
              let host = url.host, !host.isEmpty else { throw bad("not a relay:// URL") }
        guard let port = url.port, (1...65_535).contains(port) else { throw bad("the port is missing or out of range") }
        guard let idText = url.queryItems?.first(where: { $0.name == "id" })?.value else {
            throw bad("the relay's certificate ID (?id=) is missing; it pins the relay")
        }
        let id: CertificateID
        do { id = try CertificateID(parsing: idText) } catch { throw bad(error.description) }
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        return RelayEndpoint(host: bare, port: UInt16(port), id: id)
    }
}
