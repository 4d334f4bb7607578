internal import Dispatch
internal import FoundationEssentials
internal import PeerWire

/// How sessions reach their peers. Relay → direct: a relay carries a paired peer's session only while no direct path
/// works. Every `directRetryInterval`, a connected relayed session's peer is dialled at the
/// addresses known for it (nearby, discovery servers' answers, stored), one per try, and
/// looked up again at the discovery servers. A direct session that completes its handshake
/// replaces the relayed one (`begin`: direct wins over relayed at both ends), and the
/// transfers under way go on in it, as after any duplicate session.
extension ConnectionService {
    /// On `queue`, at every tick.
    func tryDirectPaths() {
        dispatchPrecondition(condition: .onQueue(queue))
        let now = ContinuousClock.now
        for session in sessions.values where session.relayHost != nil && session.machine.state == .connected {
            guard let due = session.nextDirectTry else {
                session.nextDirectTry = now + config.directRetryInterval
                continue
            }
            guard now >= due else { continue }
            session.nextDirectTry = now + config.directRetryInterval
            let device = session.deviceKey
            startLookup(device: device)
            let addresses = knownAddresses(of: device)
            guard !addresses.isEmpty else { continue }
            let address = addresses[session.directTries % addresses.count]
            session.directTries += 1
            // Failures are expected (that is why the relay carries it): not reported.
            startDial(address: address, expected: device, context: nil, progress: nil, completion: nil, quiet: true)
        }
    }

    /// The redial address of a paired peer known to us by no address at all (paired by its
    /// certificate ID through a relay, behind NAT): "" (nothing to dial directly) when it can be
    /// reached by lookups and relays (a pinned certificate ID, and discovery servers or
    /// relays), so that it is redialled there like any peer; nil when it cannot.
    func globalRedialAddress(_ device: String) -> String? {
        guard dialCertificateID(of: device) != nil, !discoveryServers.isEmpty || !relayEndpoints.isEmpty else { return nil }
        return ""
    }

    /// How often a connected session's round trip is measured at least. Keepalive pings go
    /// out only when nothing else did, and answering the peer's ping counts: without this,
    /// the end that the other always pings first would never measure it.
    var roundTripInterval: Duration { config.keepaliveInterval * 5 }

    /// On `queue`, at every tick: pings each connected session not pinged for `roundTripInterval`.
    func measureRoundTrips() {
        dispatchPrecondition(condition: .onQueue(queue))
        let now = ContinuousClock.now
        for session in sessions.values where session.machine.state == .connected {
            if let last = session.lastPingSent, now - last < roundTripInterval { continue }
            session.send([.ping(session.pingSent())])
        }
    }
}
