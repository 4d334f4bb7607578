internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerIndex
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// Sessions through Syncthing relays (`daemon --relay`): the node joins each relay and
/// answers the invitations it brings (a thread per relay, and a thread per handshake, at
/// most `maxRelayedHandshakes` at once, so a relay cannot make us run more), and reaches a
/// paired peer whose certificate ID it pinned through a relay when dialling it directly did
/// not work (every other redial attempt).
/// The Noise session runs inside the relayed byte stream exactly as over TCP: the standing
/// of the peer (paired, impersonation, unknown) is decided the same way.
extension ConnectionService {
    static let relayTimeout: Duration = .seconds(10)
    /// A member hears from its relay at least this often (strelaysrv pings every minute).
    static let relaySilence: Duration = .seconds(150)
    static let relayRejoinMaximum: Duration = .seconds(60)
    /// Relayed handshakes answered at once per relay (each bounded by the handshake timeout).
    static let maxRelayedHandshakes = 4

    /// The relays of the configuration, parsed (bad ones were refused at start), then those
    /// chosen from the relay pools.
    var relayEndpoints: [RelayEndpoint] {
        let configured = config.relays.compactMap { try? RelayURL.parse($0) }
        return configured + poolRelays.withLock { $0 }.filter { !configured.contains($0) }
    }

    /// Joins every configured relay, and the fastest of the pools' (any thread but `queue`).
    func startRelays() {
        guard let tls = queue.sync(execute: { tlsIdentity }) else { return }
        for relay in relayEndpoints { startMembership(of: relay, tls: tls) }
        startRelayPools(tls: tls)
    }

    func startMembership(of relay: RelayEndpoint, tls: TLSIdentity) {
        OSThread.start(name: "syncpeer-relay") { [self] in membership(of: relay, tls: tls) }
    }

    private func membership(of relay: RelayEndpoint, tls: TLSIdentity) {
        var delay: Duration = .seconds(1)
        while !stopped {
            do throws(NetError) {
                let member = try RelayClient.join(relay, identity: tls, timeout: Self.relayTimeout)
                relayMemberships.withLock { $0.append(member) }
                defer {
                    relayMemberships.withLock { $0.removeAll { $0 === member } }
                }
                delay = .seconds(1)
                // Invitations are answered on threads of their own, at most
                // `maxRelayedHandshakes` at once per relay: one whose other end never came
                // (strelaysrv's race, see RelayClient.sessionAttempts) must not hold up the next.
                let answering = RelayHandshakes()
                while true {
                    let invitation = try member.nextInvitation(silence: Self.relaySilence)
                    guard answering.count.withLock({ count in
                        guard count < Self.maxRelayedHandshakes else { return false }
                        count += 1
                        return true
                    }) else {
                        queue.async { [self] in emitError(nil, "relay \(relay.host): an invitation dropped (\(Self.maxRelayedHandshakes) relayed handshakes under way)") }
                        continue
                    }
                    OSThread.start(name: "syncpeer-relay-answer") { [self] in
                        answer(invitation, at: relay)
                        answering.count.withLock { $0 -= 1 }
                    }
                }
            } catch {
                if stopped { return }
                let wait = delay
                queue.async { [self] in emitError(nil, "relay \(relay.host): \(error.description) (joining again in \(wait))") }
            }
            OSThread.sleep(for: .seconds(delay.components.seconds))
            delay = min(delay * 2, Self.relayRejoinMaximum)
        }
    }

    /// Joins the session of an invitation and answers the handshake in it (on the relay's thread).
    private func answer(_ invitation: RelayInvitation, at relay: RelayEndpoint) {
        let hello = queue.sync { makeHello(context: nil, port: listenPort) }
        do throws(NetError) {
            let stream = try RelayClient.joinSession(invitation, relay: relay, timeout: Self.relayTimeout)
            stream.setSendTimeout(config.sendTimeout)
            let channel = try SecureChannel.respond(over: stream, staticKey: identity.keyPair, hello: hello,
                                                    timeout: config.handshakeTimeout, rekeyInterval: config.rekeyInterval)
            queue.async { [self] in
                if stopped { channel.close(); return }
                let session = register(channel, role: .responder, dialAddress: nil)
                session.relayHost = relay.host
                session.source = "relay \(relay.host)"  // unpaired peers through a relay share its caps
                begin(session, standing: standing(of: channel, expected: nil, address: nil))
            }
        } catch {
            queue.async { [self] in emitError(nil, "relayed handshake through \(relay.host) failed: \(error.description)") }
        }
    }

    /// Dials the paired `device` through a relay (on `queue`): those the discovery servers
    /// named for it first, then ours, each in turn until one works; false when there is no
    /// relay, no pinned certificate ID for it, or such a dial is already under way.
    func startRelayDial(device: String) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        let relays = relayCandidates(state.withLock { $0.globalFound.relays[device] } ?? [])
        guard !stopped, !relays.isEmpty, let peer = dialCertificateID(of: device), let tls = tlsIdentity else {
            return false
        }
        let key = "relay:\(device)"
        guard state.withLock({ $0.dialsInFlight.insert(key).inserted }) else { return true }
        initiateThroughRelays(relays, to: peer, tls: tls, name: "syncpeer-relay-dial", inFlight: key,
                              hello: makeHello(context: nil, port: listenPort), failed: { [self] error in
            emitError(nil, "cannot reach \(displayID(device).prefix(7)) through a relay: \(error.description)")
        }, connected: { [self] channel, relay in
            let session = register(channel, role: .initiator, dialAddress: nil)
            session.relayHost = relay.host
            begin(session, standing: standing(of: channel, expected: device, address: relay.description))
        })
        return true
    }

    /// `initiate` through the first of `relays` that reaches `peer` (on `queue`); `connected` learns which.
    ///
    /// A session whose handshake times out is asked for again, twice at most: the peer's own join of
    /// it can lose strelaysrv's race (RelayClient.sessionAttempts) and leave us waiting for
    /// an answer that never comes (seen under load as `pair` failing after 10 s).
    func initiateThroughRelays(_ relays: [RelayEndpoint], to peer: CertificateID, tls: TLSIdentity, name: String, inFlight: String,
                               hello: Hello, attempts: Int = 3, failed: @escaping @Sendable (NetError) -> Void,
                               connected: @escaping @Sendable (SecureChannel, RelayEndpoint) -> Void) {
        let used = RelayChoice()
        initiate(name: name, inFlight: inFlight, hello: hello, connect: { [config] () throws(NetError) in
            let (stream, relay) = try RelayClient.session(with: peer, through: relays, identity: tls, timeout: Self.relayTimeout)
            used.relay.withLock { $0 = relay }
            stream.setSendTimeout(config.sendTimeout)
            return stream
        }, failed: { [self] error in
            // Only a handshake that timed out inside a session we got: a relay that stalls or
            // lies has failed before (`used` unset) and is not asked again.
            if attempts > 1, case .timedOut = error, used.relay.withLock({ $0 }) != nil {
                initiateThroughRelays(relays, to: peer, tls: tls, name: name, inFlight: inFlight, hello: hello,
                                      attempts: attempts - 1, failed: failed, connected: connected)
            } else {
                failed(error)
            }
        }, connected: { channel in connected(channel, used.relay.withLock { $0 } ?? relays[0]) })
    }

    /// The relays to try, in order: `first`, then the configured and pool ones, at most
    /// `maxRelayCandidates` (each costs up to `relayTimeout` when it lies or stalls).
    func relayCandidates(_ first: [RelayEndpoint]) -> [RelayEndpoint] {
        var seen = Set<RelayEndpoint>()
        return Array((first + relayEndpoints).filter { seen.insert($0).inserted }.prefix(Self.maxRelayCandidates))
    }

    static let maxRelayCandidates = 4
}

/// How many relayed handshakes a membership is answering now.
final class RelayHandshakes: Sendable {
    let count = Mutex(0)
}

/// Which relay a relayed dial went through: set on the dial thread, read on the queue.
final class RelayChoice: Sendable {
    let relay = Mutex<RelayEndpoint?>(nil)
}
