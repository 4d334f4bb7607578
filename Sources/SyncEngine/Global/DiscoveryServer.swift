internal import FoundationEssentials
package import PeerCrypto

/// A global discovery server (Syncthing's Global Discovery v3, `stdiscosrv`) as a URL names
/// it, Syncthing's way: `https://HOST[:PORT]/PATH?id=SERVER-CERTIFICATE-ID[&noannounce][&nolookup]`.
/// The server is pinned by its certificate ID: a TLS session with anything else fails.
package struct DiscoveryServer: Sendable, Hashable, CustomStringConvertible {
    package let host: String
    package let port: UInt16
    /// The request path (`/v2/` on Syncthing's public servers, `/` on a plain stdiscosrv).
    package let path: String
    package let id: CertificateID
    package let announces: Bool
    package let looksUp: Bool

    /// Syncthing's public servers (`daemon --global`): one to look up (any address family),
    /// one per address family to announce to.
    package static let publicDefaults: [String] = [
        "https://discovery.syncthing.net/v2/?noannounce&id=LYXKCHX-VI3NYZR-ALCJBHF-WMZYSPK-QG6QJA3-MPFYMSO-U56GTUK-NA2MIAW",
        "https://discovery-v4.syncthing.net/v2/?nolookup&id=LYXKCHX-VI3NYZR-ALCJBHF-WMZYSPK-QG6QJA3-MPFYMSO-U56GTUK-NA2MIAW",
        "https://discovery-v6.syncthing.net/v2/?nolookup&id=LYXKCHX-VI3NYZR-ALCJBHF-WMZYSPK-QG6QJA3-MPFYMSO-U56GTUK-NA2MIAW",
    ]

    package init(parsing text: String) throws(EngineError) {
        func bad(_ why: String) -> EngineError {
            .invalidArgument("discovery server '\(text.prefix(200))': \(why) (expected https://HOST:PORT/?id=SERVER-ID)")
        }
        let parsed = try HTTPSURL(text, bad: bad)
        let url = parsed.components
        let items = url.queryItems ?? []
        guard let idText = items.first(where: { $0.name == "id" })?.value else {
            throw bad("the server's certificate ID (?id=) is missing; it pins the server")
        }
        do { id = try CertificateID(parsing: idText) } catch { throw bad(error.description) }
        host = parsed.host
        port = parsed.port
        path = url.path.isEmpty ? "/" : url.path
        announces = !items.contains { $0.name == "noannounce" }
        looksUp = !items.contains { $0.name == "nolookup" }
    }

    package var description: String {
        let hostText = host.contains(":") ? "[\(host)]" : host
        var text = "https://\(hostText):\(port)\(path)?id=\(id)"
        if !announces { text += "&noannounce" }
        if !looksUp { text += "&nolookup" }
        return text
    }
}
