internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerNet
internal import Synchronization

/// `syncpeer pair CERTIFICATE-ID`: a node that is not on this network, named by the ID
/// relays and discovery servers know it by. It is looked up at the discovery servers and
/// dialled there (direct first), else reached through the first relay; the invitation, its
/// code and the user's answer are as for any pairing. The certificate the peer then sends
/// must have that ID (ConnectionService+Certificates), or the pairing is undone.
extension ConnectionService {
    func invite(certificate: CertificateID, context: String?, progress: @escaping @Sendable (NodeEvent) -> Void,
                completion: @escaping @Sendable (Result<PeerRef, EngineError>) -> Void) {
        queue.async { [self] in
            guard let tls = tlsIdentity else { completion(.failure(.network("no TLS certificate"))); return }
            guard certificate != tls.id else { completion(.failure(.invalidArgument("\(certificate) is this node's own certificate ID"))); return }
            let servers = discoveryServers.filter(\.looksUp)
            guard !servers.isEmpty || !relayEndpoints.isEmpty || !config.relayPools.isEmpty else {
                completion(.failure(.invalidArgument("\(certificate) is a certificate ID: pairing by it needs --discovery-server, --relay or --relay-pool on the daemon")))
                return
            }
            OSThread.start(name: "syncpeer-lookup") { [self] in
                var direct: [String] = []
                var relays: [RelayEndpoint] = []
                for server in servers {
                    let found = (try? GlobalDiscoveryClient(server: server, identity: tls).lookup(certificate)) ?? []
                    direct += found.compactMap { Self.hostPort(ofTCPAddress: $0) }
                    relays += found.compactMap { $0.hasPrefix("relay://") ? try? RelayURL.parse($0) : nil }
                }
                queue.async { [self, direct, relays] in
                    let race = PairRace(certificate: certificate, direct: direct, relays: relays, context: context,
                                        progress: progress, completion: completion)
                    dialNext(race)
                }
            }
        }
    }

    /// Dials the looked-up addresses at once, at most `PairRace.maxInFlight` at a time (on
    /// `queue`): a stale address costs its connect timeout only beside the others. The first
    /// completed handshake goes on to the invitation; a later one is closed. When every one
    /// failed, the relays in turn: those the peer announced (it is there), then ours (it may
    /// be), at most `maxRelayCandidates`. The looked-up addresses are bounded by
    /// `GlobalDiscoveryClient.maxAddresses` per server.
    private func dialNext(_ race: PairRace) {
        dispatchPrecondition(condition: .onQueue(queue))
        while let address = race.nextAddress() {
            guard let target = try? HostPort(parsing: address),
                  let port: UInt16 = state.withLock({ $0.stopped || !$0.dialsInFlight.insert(address).inserted ? nil : $0.listenPort })
            else { race.ended(); continue }
            initiate(name: "syncpeer-dial", inFlight: address, hello: makeHello(context: race.context, port: port),
                     connect: { [config] () throws(NetError) in
                let stream = try TCPConnection.connect(to: target, timeout: .seconds(5))
                stream.setSendTimeout(config.sendTimeout)
                return stream
            }, failed: { [self] error in
                emitError(nil, "cannot connect to \(address): \(error.description)")
                race.ended()
                dialNext(race)
            }, connected: { [self] channel in
                race.ended()
                // Our own address (a discovery server may list it): not the peer, and no winner.
                if channel.remoteDeviceID.compact == identity.deviceID.compact {
                    channel.close()
                    emitError(nil, "cannot pair through \(address): it is this node itself")
                    return dialNext(race)
                }
                guard race.claim() else { return channel.close() }
                let session = register(channel, role: .initiator, dialAddress: address)
                session.pairCompletion = race.completion
                session.pairProgress = race.progress
                session.expectedCertificate = race.certificate
                begin(session, standing: standing(of: channel, expected: nil, address: address))
            })
        }
        if race.allFailed { inviteThroughRelays(race) }
    }

    /// Every looked-up address failed: the relays in turn (on `queue`).
    private func inviteThroughRelays(_ race: PairRace) {
        let (certificate, completion, progress) = (race.certificate, race.completion, race.progress)
        let relays = relayCandidates(race.relays)
        guard !relays.isEmpty, let tls = tlsIdentity else {
            let why = config.relayPools.isEmpty ? "no relay is configured" : "the relay pools' relays are not chosen yet"
            completion(.failure(.notFound("\(certificate) was not found at the discovery servers, and \(why)")))
            return
        }
        initiateThroughRelays(relays, to: certificate, tls: tls, name: "syncpeer-relay-pair", inFlight: "relay-pair:\(certificate)",
                              hello: makeHello(context: race.context, port: listenPort), failed: { error in
            completion(.failure(.connection("cannot reach \(certificate) through a relay", error)))
        }, connected: { [self] channel, relay in
            let session = register(channel, role: .initiator, dialAddress: nil)
            session.relayHost = relay.host
            session.expectedCertificate = certificate
            session.pairCompletion = completion
            session.pairProgress = progress
            begin(session, standing: standing(of: channel, expected: nil, address: relay.description))
        })
    }

    /// "HOST:PORT" of a `tcp://HOST:PORT` address.
    static func hostPort(ofTCPAddress address: String) -> String? {
        guard address.hasPrefix("tcp"), let url = URLComponents(string: address), let host = url.host, let port = url.port,
              (1...65_535).contains(port) else { return nil }
        return HostPort(host: host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host, port: UInt16(port)).description
    }
}
