internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerNet

/// Announce and look up at one global discovery server (Syncthing's Global Discovery v3):
///
///     announce: POST PATH, TLS client certificate = ours, body {"addresses": ["tcp://…", "relay://…"]}
///               → 204, Reannounce-After: seconds          (the server knows us by our certificate ID)
///     lookup:   GET PATH?device=CERTIFICATE-ID → 200 {"seen": "…", "addresses": [...]}, or 404 + Retry-After
///
/// Blocking (a thread of the caller's). The server is hostile like any peer: its answer is
/// bounded (`HTTPSExchange`: 8 KiB of headers, 64 KiB of body, `timeout` in all), an answer
/// with more than `maxAddresses` addresses is refused whole, addresses that are not
/// `tcp://HOST:PORT` or `relay://HOST:PORT/…` (or longer than `maxAddressLength`) are
/// dropped, and the delays it asks for are clamped to `delayRange`. What it cannot do is
/// make us trust an address: whoever answers there must complete the Noise handshake as
/// the device we expect.
struct GlobalDiscoveryClient: Sendable {
    let server: DiscoveryServer
    let identity: TLSIdentity
    var timeout: Duration = .seconds(10)

    static let maxAddresses = 32
    static let maxAddressLength = 512
    /// Reannounce-After / Retry-After outside this range are taken as its ends.
    static let delayRange: ClosedRange<Int> = 10...3_600

    enum Failure: Error, Equatable, CustomStringConvertible {
        /// The server does not know the device (404); ask again after the delay.
        case notFound(retryAfter: Int)
        /// Refused with an HTTP status (and the delay the server asked for).
        case refused(status: Int, retryAfter: Int)
        /// The server's answer broke a rule or a bound.
        case badAnswer(String)
        case network(NetError)

        var description: String {
            switch self {
            case let .notFound(delay): "not known to the discovery server (ask again in \(delay) s)"
            case let .refused(status, delay): "the discovery server answered HTTP \(status) (retry in \(delay) s)"
            case let .badAnswer(why): "the discovery server's answer was refused: \(why)"
            case let .network(error): "discovery server: \(error)"
            }
        }
    }

    /// Announces `addresses`; returns the seconds until the server wants the next announce.
    func announce(_ addresses: [String]) throws(Failure) -> Int {
        let body: [UInt8]
        guard let encoded = JSONValue.bytes(of: ["addresses": addresses]) else { throw .badAnswer("cannot encode the announcement") }
        body = encoded
        let response = try exchange("POST", path: server.path, body: body)
        guard (200..<300).contains(response.status) else {
            throw .refused(status: response.status, retryAfter: Self.delay(response.headers["retry-after"], default: 60))
        }
        return Self.delay(response.headers["reannounce-after"], default: 1_800)
    }

    /// The addresses the server holds for `device`, checked and bounded.
    func lookup(_ device: CertificateID) throws(Failure) -> [String] {
        let separator = server.path.contains("?") ? "&" : "?"
        let response = try exchange("GET", path: "\(server.path)\(separator)device=\(device)", body: nil)
        switch response.status {
        case 200: return try Self.addresses(fromAnswer: response.body)
        case 404: throw .notFound(retryAfter: Self.delay(response.headers["retry-after"], default: 60))
        default: throw .refused(status: response.status, retryAfter: Self.delay(response.headers["retry-after"], default: 60))
        }
    }

    /// The usable addresses of a lookup's answer, or why it is refused.
    static func addresses(fromAnswer body: [UInt8]) throws(Failure) -> [String] {
        guard let object = JSONValue.object(parsing: body) else {
            throw .badAnswer("not a JSON object")
        }
        guard let list = object["addresses"] as? [Any] else { throw .badAnswer("no \"addresses\" list") }
        guard list.count <= maxAddresses else {
            throw .badAnswer("\(list.count) addresses, more than the \(maxAddresses) accepted")
        }
        return list.compactMap { $0 as? String }.filter { usable($0) }
    }

    /// A `tcp://HOST:PORT` (tcp4, tcp6) or `relay://HOST:PORT/…` address of sane length.
    static func usable(_ address: String) -> Bool {
        guard address.utf8.count <= maxAddressLength, let url = URLComponents(string: address),
              let scheme = url.scheme, ["tcp", "tcp4", "tcp6", "relay"].contains(scheme),
              let host = url.host, !host.isEmpty, let port = url.port, (1...65_535).contains(port) else { return false }
        return true
    }

    static func delay(_ header: String?, default fallback: Int) -> Int {
        guard let header, let seconds = Int(header.trimmingWhitespace()) else { return fallback }
        return min(max(seconds, delayRange.lowerBound), delayRange.upperBound)
    }

    private func exchange(_ method: String, path: String, body: [UInt8]?) throws(Failure) -> HTTPSExchange.Response {
        let deadline = ContinuousClock.now + timeout
        do {
            let connection = try TCPConnection.connect(host: server.host, port: server.port, timeout: timeout)
            let stream = try TLSStream(over: connection, identity: identity, expected: server.id, deadline: deadline)
            defer { stream.close() }
            let hostHeader = server.host.contains(":") ? "[\(server.host)]:\(server.port)" : "\(server.host):\(server.port)"
            return try HTTPSExchange.perform(method, path: path, host: hostHeader, body: body, over: stream, deadline: deadline)
        } catch {
            throw .network(error)
        }
    }
}
