internal import Dispatch
internal import FoundationEssentials
package import PeerNet
internal import Synchronization

/// A relay pool (Syncthing's `https://relays.syncthing.net/endpoint`): an HTTPS site whose
/// answer lists public relays, `{"relays": [{"url": "relay://HOST:PORT/?id=…&…", …}, …]}`.
/// `daemon --global` uses the public pool (`--relay-pool URL` names others); the node joins
/// a few of its relays, the ones that answer fastest, as Syncthing's dynamic relay client does.
///
/// The pool is an ordinary HTTPS site, not pinned: its certificate is checked against the
/// system's CAs (OpenSSL's default paths; `SSL_CERT_FILE` names another bundle) and its name.
/// It is hostile like any server: its answer is bounded (`maxBody`, `maxRelays`, each URL
/// `RelayURL`'s 1 KiB), an answer over a bound is refused whole, entries that are not relay
/// URLs are dropped, and what it lists are only candidates: each relay is still pinned by the
/// ID in its URL, and a relay can at worst refuse service (the Noise session runs inside).
package struct RelayPool: Sendable, Hashable, CustomStringConvertible {
    package let host: String
    package let port: UInt16
    /// The request path with its query, as sent.
    package let path: String

    /// Syncthing's public pool (`daemon --global`).
    package static let publicDefault = "https://relays.syncthing.net/endpoint"
    /// The public pool lists some hundreds of relays with their statistics (about 1 KiB each).
    package static let maxBody = 2 << 20
    package static let maxRelays = 2_000
    /// Relays whose connect time is measured (picked at random among those listed), and how
    /// many of the fastest are joined.
    static let probed = 16
    static let joined = 3
    static let probeTimeout: Duration = .seconds(2)
    /// Connect times in the same 50 ms step count as equal (the pick among them is random),
    /// so that the nodes near one fast relay spread over the fast ones, as Syncthing does.
    static let latencyStep: Duration = .milliseconds(50)

    package init(parsing text: String) throws(EngineError) {
        func bad(_ why: String) -> EngineError {
            .invalidArgument("relay pool '\(text.prefix(200))': \(why) (expected https://HOST[:PORT]/PATH)")
        }
        let parsed = try HTTPSURL(text, bad: bad)
        let url = parsed.components
        host = parsed.host
        port = parsed.port
        path = (url.path.isEmpty ? "/" : url.percentEncodedPath) + (url.percentEncodedQuery.map { "?\($0)" } ?? "")
    }

    package var description: String {
        "https://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path)"
    }

    /// The relays the pool lists now (blocking; at most `timeout` in all).
    func fetch(timeout: Duration = .seconds(20)) throws(EngineError) -> [RelayEndpoint] {
        let deadline = ContinuousClock.now + timeout
        let response: HTTPSExchange.Response
        do {
            let connection = try TCPConnection.connect(host: host, port: port, timeout: timeout)
            let stream = try TLSStream(over: connection, identity: nil, expected: nil, verifyingHost: host, deadline: deadline)
            defer { stream.close() }
            let hostHeader = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            response = try HTTPSExchange.perform("GET", path: path, host: hostHeader, over: stream, deadline: deadline,
                                                 maxBody: Self.maxBody)
        } catch {
            throw .network("relay pool \(host): \(error.description)")
        }
        guard response.status == 200 else { throw .network("relay pool \(host) answered HTTP \(response.status)") }
        return try Self.relays(fromAnswer: response.body, pool: host)
    }

    /// The relays of a pool's answer (entries that are not relay URLs dropped), or why it is refused.
    static func relays(fromAnswer body: [UInt8], pool: String) throws(EngineError) -> [RelayEndpoint] {
        guard let object = JSONValue.object(parsing: body) else {
            throw .network("relay pool \(pool) answered something that is not a JSON object")
        }
        guard let list = object["relays"] as? [Any] else { throw .network("relay pool \(pool) answered no \"relays\" list") }
        guard list.count <= maxRelays else {
            throw .network("relay pool \(pool) listed \(list.count) relays, more than the \(maxRelays) accepted")
        }
        var seen = Set<RelayEndpoint>()
        return list.compactMap { entry -> RelayEndpoint? in
            guard let url = (entry as? [String: Any])?["url"] as? String, let relay = try? RelayURL.parse(url),
                  seen.insert(relay).inserted else { return nil }
            return relay
        }
    }

    /// The relays to join among `candidates`: at most `probed` of them (at random) have their
    /// connect time measured (`latency`, nil: no answer) at once, and the `joined` fastest
    /// that answered are kept, fastest first.
    static func choose(_ candidates: [RelayEndpoint],
                       latency: @Sendable (RelayEndpoint) -> Duration? = { RelayPool.measure($0) }) -> [RelayEndpoint] {
        let sample = Array(candidates.shuffled().prefix(probed))
        let measured = Mutex<[(relay: RelayEndpoint, step: Int64, tie: UInt32)]>([])
        DispatchQueue.concurrentPerform(iterations: sample.count) { index in
            guard let time = latency(sample[index]) else { return }
            let step = Int64(time / latencyStep)
            measured.withLock { $0.append((sample[index], step, UInt32.random(in: .min ... .max))) }
        }
        return measured.withLock { $0 }.sorted { ($0.step, $0.tie) < ($1.step, $1.tie) }.prefix(joined).map { $0.relay }
    }

    /// How long a TCP connection to the relay takes to open (Syncthing measures the same).
    static func measure(_ relay: RelayEndpoint) -> Duration? {
        let start = ContinuousClock.now
        guard let connection = try? TCPConnection.connect(host: relay.host, port: relay.port, timeout: probeTimeout) else { return nil }
        connection.close()
        return ContinuousClock.now - start
    }
}
