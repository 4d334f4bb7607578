internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerNet
internal import Synchronization

/// What global discovery servers said of paired peers, kept in the connection service's
/// `state` (written on its queue): their direct addresses ("HOST:PORT", dialled before the stored ones) and relays.
/// Only paired peers with a pinned certificate ID are looked up, at most once a minute each
/// (`lookupInterval`, or later as the server asks), so it stays as small as the pairings.
struct GlobalFound {
    var addresses: [String: [String]] = [:]
    var relays: [String: [RelayEndpoint]] = [:]
    var nextLookup: [String: ContinuousClock.Instant] = [:]
    var lookupsInFlight: Set<String> = []
}

/// `daemon --discovery-server URL` (and `--global`): a thread per server announces this
/// node's addresses (its listen address, an unspecified host filled in by the server with
/// the address it sees; the relays it joined) and announces again when the server says; a
/// paired peer that does not answer where we last saw it is looked up by its certificate ID.
extension ConnectionService {
    var discoveryServers: [DiscoveryServer] { config.discoveryServers.compactMap { try? DiscoveryServer(parsing: $0) } }

    /// Starts announcing to every configured server (any thread but `queue`).
    func startAnnouncing() {
        guard let tls = queue.sync(execute: { tlsIdentity }) else { return }
        for server in discoveryServers where server.announces {
            OSThread.start(name: "syncpeer-announce") { [self] in announceLoop(GlobalDiscoveryClient(server: server, identity: tls)) }
        }
    }

    private func announceLoop(_ client: GlobalDiscoveryClient) {
        let host = HostAddresses()
        while !stopped {
            let addresses = announcedAddresses(host)
            let delay: Int
            var announced = false
            do throws(GlobalDiscoveryClient.Failure) {
                delay = try client.announce(addresses)
                announced = true
            } catch {
                switch error {
                case let .refused(_, retry), let .notFound(retry): delay = retry
                default: delay = GlobalDiscoveryClient.delayRange.lowerBound
                }
                queue.async { [self] in emitError(nil, "announcing to \(client.server.host): \(error.description)") }
            }
            // Sleeps in short steps so that a stopping node does not wait for it (`stopped` is
            // read under the state's lock, without a hop to the node's queue). After a
            // successful announce, what changed (a relay joined or lost) is announced at once
            // (not before `reannounceGap`): behind NAT the relays are the only way in, and the
            // first announce goes out before any relay join has completed.
            let until = ContinuousClock.now + .seconds(delay), earliest = ContinuousClock.now + Self.reannounceGap
            while ContinuousClock.now < until, !stopped {
                if announced, ContinuousClock.now >= earliest, announcedAddresses(host) != addresses { break }
                OSThread.sleep(for: .seconds(0.5))
            }
        }
    }

    /// The least time between two announces to a server when what we announce changes.
    static let reannounceGap: Duration = .seconds(2)

    /// What we announce (on the announce loop's thread, off `queue`): `tcp://HOST:PORT`
    /// (`tcp://:PORT` when listening on all addresses, which the server fills in), then, when listening on all IPv6 ones, this
    /// host's global IPv6 addresses (`GlobalIPv6`: no link-local or unique local ones), and
    /// `relay://…` for each relay joined now.
    func announcedAddresses(_ addresses: HostAddresses) -> [String] {
        let (listenHost, listenPort) = state.withLock { ($0.listenHost, $0.listenPort) }
        let unspecified = listenHost.isEmpty || listenHost == "0.0.0.0" || listenHost == "::"
        let host = unspecified ? "" : (listenHost.contains(":") ? "[\(listenHost)]" : listenHost)
        let ipv6 = listenHost.isEmpty || listenHost == "::" ? addresses.globalIPv6().map { "tcp://[\($0)]:\(listenPort)" } : []
        return ["tcp://\(host):\(listenPort)"] + ipv6 + relayMemberships.withLock { $0.map(\.relay.description) }
    }

    /// Looks `device` up at the servers that look up (on `queue`), unless it was looked up
    /// recently or has no pinned certificate ID; what is found is used by the next redials.
    func startLookup(device: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !stopped, let peer = dialCertificateID(of: device), let tls = tlsIdentity,
              state.withLock({ !$0.globalFound.lookupsInFlight.contains(device) && $0.globalFound.nextLookup[device].map({ $0 <= .now }) ?? true })
        else { return }
        let servers = discoveryServers.filter(\.looksUp)
        guard !servers.isEmpty else { return }
        state.withLock {
            $0.globalFound.lookupsInFlight.insert(device)
            $0.globalFound.nextLookup[device] = .now + config.lookupInterval
        }
        OSThread.start(name: "syncpeer-lookup") { [self] in
            var found: [String] = []
            var retry = 0
            for server in servers {
                do throws(GlobalDiscoveryClient.Failure) {
                    found += try GlobalDiscoveryClient(server: server, identity: tls).lookup(peer)
                } catch {
                    if case let .notFound(delay) = error { retry = max(retry, delay) }
                    if case .notFound = error { continue }
                    queue.async { [self] in emitError(nil, "looking up \(displayID(device).prefix(7)) at \(server.host): \(error.description)") }
                }
            }
            queue.async { [self, found, retry] in
                state.withLock {
                    $0.globalFound.lookupsInFlight.remove(device)
                    if retry > 0 { $0.globalFound.nextLookup[device] = .now + .seconds(retry) }
                }
                record(found, for: device)
            }
        }
    }

    /// Keeps the usable addresses a lookup gave (on `queue`): TCP ones as "HOST:PORT",
    /// relays as endpoints. The peer at them still has to prove its key in the handshake.
    private func record(_ found: [String], for device: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        var direct: [String] = []
        var relays: [RelayEndpoint] = []
        for address in found.prefix(GlobalDiscoveryClient.maxAddresses) {
            if address.hasPrefix("relay://") {
                if let relay = try? RelayURL.parse(address) { relays.append(relay) }
            } else if let hostPort = Self.hostPort(ofTCPAddress: address) {
                direct.append(hostPort)
            }
        }
        state.withLock { state in
            state.globalFound.addresses[device] = direct.isEmpty ? nil : direct
            state.globalFound.relays[device] = relays.isEmpty ? nil : relays
            if var redial = state.redials[device], let first = direct.first {
                redial.address = first
                redial.nextAttempt = .now
                state.redials[device] = redial
            }
        }
        wakeTimer()
    }
}
