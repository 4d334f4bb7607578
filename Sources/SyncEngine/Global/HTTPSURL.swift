internal import FoundationEssentials

/// The `https://HOST[:PORT]/…` URL of a server we call (a global discovery server, a relay
/// pool), checked: at most 1 KiB, https, a host, a port in range (443 by default); the host
/// without the brackets of an IPv6 literal.
struct HTTPSURL {
    let components: URLComponents
    let host: String
    let port: UInt16

    /// `bad` makes the error from the reason.
    init(_ text: String, bad: (String) -> EngineError) throws(EngineError) {
        guard text.utf8.count <= 1_024, let url = URLComponents(string: text), url.scheme == "https",
              let host = url.host, !host.isEmpty else { throw bad("not an https URL") }
        let port = url.port ?? 443
        guard (1...65_535).contains(port) else { throw bad("bad port") }
        components = url
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        self.port = UInt16(port)
    }
}
