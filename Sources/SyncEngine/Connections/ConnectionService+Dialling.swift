internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerIndex
internal import PeerNet
internal import PeerWire
internal import Synchronization

/// Dialling and accepting: a dial thread per outgoing connection, the accept loop with a
/// handshake thread per incoming one (bounded by `pendingHandshakes`), and how much a fresh
/// channel's peer is trusted.
extension ConnectionService {
    /// How long the node with the larger device ID waits before dialling a paired peer it
    /// discovered: the smaller one dials at once, so both rarely dial at the same moment
    /// (if the smaller one cannot see us, we still dial after this grace).
    static let discoveryDialGrace: Duration = .milliseconds(1500)

    /// Starts dialling from any thread (the work happens on `queue` and a dial thread).
    func dial(address: String, expected: String?, context: String?,
              progress: (@Sendable (NodeEvent) -> Void)? = nil,
              completion: (@Sendable (Result<PeerRef, EngineError>) -> Void)?) {
        queue.async { [self] in
            startDial(address: address, expected: expected, context: context, progress: progress, completion: completion)
        }
    }

    /// Runs on `queue`.
    func startDial(address: String, expected: String?, context: String?,
                   progress: (@Sendable (NodeEvent) -> Void)?,
                   completion: (@Sendable (Result<PeerRef, EngineError>) -> Void)?,
                   expectedCertificate: CertificateID? = nil, quiet: Bool = false) {
        dispatchPrecondition(condition: .onQueue(queue))
        let target: HostPort
        do { target = try HostPort(parsing: address) } catch {
            completion?(.failure(.invalidArgument(error.description)))
            return
        }
        let port: UInt16? = state.withLock { state in
            if state.stopped || !state.dialsInFlight.insert(address).inserted { return nil }
            return state.listenPort
        }
        guard let port else {
            completion?(.failure(.network("already connecting to \(address)")))
            return
        }
        let hello = makeHello(context: context, port: port)
        initiate(name: "syncpeer-dial", inFlight: address, hello: hello, connect: { [config] () throws(NetError) in
            let stream = try TCPConnection.connect(to: target, timeout: .seconds(5))
            stream.setSendTimeout(config.sendTimeout)
            return stream
        }, failed: { [self] error in
            if !quiet { emitError(nil, "cannot connect to \(address): \(error.description)") }
            completion?(.failure(.connection("cannot connect to \(address)", error)))
        }, connected: { [self] channel in
            let session = register(channel, role: .initiator, dialAddress: address)
            session.pairCompletion = completion
            session.pairProgress = progress
            session.expectedCertificate = expectedCertificate
            begin(session, standing: standing(of: channel, expected: expected, address: address))
        })
    }

    /// On a thread named `name`: `connect` a stream and run the handshake as its initiator,
    /// then back on `queue`, `inFlight` leaves `dialsInFlight` and `failed` or `connected` runs.
    func initiate(name: String, inFlight: String, hello: Hello, connect: @escaping @Sendable () throws(NetError) -> any ByteStream,
                  failed: @escaping @Sendable (NetError) -> Void, connected: @escaping @Sendable (SecureChannel) -> Void) {
        OSThread.start(name: name) { [self] in
            let outcome: Result<SecureChannel, NetError>
            do throws(NetError) {
                outcome = .success(try SecureChannel.initiate(over: try connect(), staticKey: identity.keyPair, hello: hello,
                                                              timeout: config.handshakeTimeout, rekeyInterval: config.rekeyInterval))
            } catch {
                outcome = .failure(error)
            }
            queue.async { [self] in
                _ = state.withLock { $0.dialsInFlight.remove(inFlight) }
                switch outcome {
                case let .failure(error): failed(error)
                case let .success(channel): connected(channel)
                }
            }
        }
    }

    /// Discovery saw the paired-or-not device `device` at `address` (on `queue`). Dials it
    /// when it is paired and not connected, expecting its pinned key: a node that only
    /// advertises a paired peer's ID or name is refused by the handshake's impersonation
    /// check. Unpaired peers are never dialled from here, nor peers the user disconnected
    /// (until they connect again or the node restarts).
    func dialDiscovered(_ device: String, at address: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        // Unreadable: not dialled from here (nothing is paired or forgotten on it; discovery
        // sees the device again, and redials planned before go on).
        guard !stopped, nearby?.isHeldOff(device) == false,
              let record = try? index.peer(deviceID: device), record.trust == .paired,
              !hasSession(device: device, where: { $0 != .closed })
        else { return }
        let first = identity.deviceID.compact < device
        let redial = Redial(address: address, nextAttempt: .now + (first ? config.redialInitial : Self.discoveryDialGrace),
                            delay: config.redialInitial)
        state.withLock { $0.redials[device] = redial }
        wakeTimer()
        if first { startDial(address: address, expected: device, context: nil, progress: nil, completion: nil) }
    }

    /// The most devices whose pairing is read again at once (`planRedial`).
    static let maxPairingRechecks = 64

    /// Plans a redial of `device` (`peer`), whose session ended, when it is paired (on
    /// `queue`). When the index cannot say whether it is, that is said once and read again
    /// with the redials' back-off (`redialInitial` doubling up to `redialMaximum`; one chain
    /// per device, `maxPairingRechecks` at most) until it reads: the peer is then
    /// redialled, never on a guess. (Before, it came back only by discovery, its own dial
    /// or a restart.) `later`: the peer refused us with `tryLater`; its redial waits
    /// `redialInitial`, then twice as long after each such refusal until we connect
    /// (`laterDelays`, one per paired device).
    func planRedial(_ peer: PeerRef, device: String, recheck delay: Duration? = nil, later: Bool = false) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !stopped else { return }
        let record: PeerRecord?
        do { record = try index.peer(deviceID: device) } catch {
            let wait = delay ?? config.redialInitial
            if delay == nil {
                // Any key can end a session here (refused: the peers cannot be read), so the
                // chains are bounded; past the bound, a peer comes back as it did before.
                let planned = state.withLock { state -> Bool? in
                    if state.pairingRechecks.contains(device) { return nil }  // a chain runs
                    guard state.pairingRechecks.count < Self.maxPairingRechecks else { return false }
                    state.pairingRechecks.insert(device)
                    return true
                }
                guard let planned else { return }
                emitError(peer, "cannot read whether \(peer.name) is paired to reconnect to it ("
                          + (planned ? "reading it again in \(wait), then less often" : "\(Self.maxPairingRechecks) peers wait for that already")
                          + "): \(error.description)")
                guard planned else { return }
            }
            let next = min(wait * 2, config.redialMaximum)
            queue.asyncAfter(deadline: .now() + .milliseconds(Int(wait / .milliseconds(1)))) { [weak self] in
                self?.planRedial(peer, device: device, recheck: next, later: later)
            }
            return
        }
        if delay != nil { _ = state.withLock { $0.pairingRechecks.remove(device) } }
        if let record, record.trust == .paired,
           let stored = record.addresses.first ?? nearby?.addresses(of: device).first ?? globalRedialAddress(device),
           !sessions.values.contains(where: { $0.deviceKey == device }) {
            let address = redialAddress(for: device, attempt: 0, fallback: stored)
            state.withLock { state in
                var wait = config.redialInitial
                if later {
                    wait = state.laterDelays[device].map { min($0 * 2, config.redialMaximum) } ?? wait
                    state.laterDelays[device] = wait
                }
                state.redials[device] = Redial(address: address, nextAttempt: .now + wait, delay: wait)
            }
            wakeTimer()
        }
    }

    /// Discovery saw `device` back with a new address or port (after a crash, say): a
    /// pending redial goes there now (on `queue`).
    func peerMoved(_ device: String, to address: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        state.withLock { state in
            guard var redial = state.redials[device] else { return }
            redial.address = address
            redial.nextAttempt = .now
            redial.delay = config.redialInitial
            state.redials[device] = redial
        }
        wakeTimer()
    }

    func acceptLoop(_ listener: TCPListener) {
        while true {
            let stream: TCPConnection
            do { stream = try listener.accept() } catch {
                let done = queue.sync { stopped }
                if done { return }
                if case .closed = error { return }
                continue
            }
            let source = SourceSlots<TCPConnection>.sourceKey(stream.remoteHost)
            let slot = nextHandshakeID.add(1, ordering: .relaxed).oldValue
            switch pendingHandshakes.withLock({ $0.admit(id: slot, source: source, holder: stream) }) {
            case .admitted:
                break
            case let .admittedEvicting(oldest):
                oldest.close()  // its handshake thread fails and ends
            case let .refused(why):
                stream.close()
                queue.async { [self] in connectionRefused(from: source, "handshakes in progress: \(why)") }
                continue
            }
            stream.setSendTimeout(config.sendTimeout)
            let hello = makeHello(context: nil, port: queue.sync { listenPort })
            OSThread.start(name: "syncpeer-handshake") { [self] in
                defer { pendingHandshakes.withLock { $0.release(id: slot) } }
                respond(over: stream, hello: hello, source: source, dialBackHost: stream.remoteHost)
            }
        }
    }

    /// On a handshake thread: answers the handshake on `stream` as its responder, then (on
    /// `queue`) registers and begins the session; the peer is dialled back at its Hello's
    /// port on `dialBackHost`, when there is one.
    func respond(over stream: any ByteStream, hello: Hello, source: String, dialBackHost: String?) {
        do throws(NetError) {
            let channel = try SecureChannel.respond(over: stream, staticKey: identity.keyPair, hello: hello,
                                                    timeout: config.handshakeTimeout, rekeyInterval: config.rekeyInterval)
            let dialBack = dialBackHost.flatMap { host in
                channel.remoteHello.listenPort.map { HostPort(host: host, port: $0).description }
            }
            queue.async { [self] in
                if stopped { channel.close(); return }
                let session = register(channel, role: .responder, dialAddress: dialBack)
                session.source = source
                begin(session, standing: standing(of: channel, expected: nil, address: nil))
            }
        } catch {
            stream.close()
            queue.async { [self] in
                emitError(nil, "handshake with \(stream.remoteDescription) failed: \(error.description)")
            }
        }
    }

    func makeHello(context: String?, port: UInt16) -> Hello {
        Hello(displayName: identity.displayName, softwareVersion: SyncEngine.version,
              features: features, context: context, listenPort: port == 0 ? nil : port)
    }

    /// How much the node trusts the peer of a fresh channel.
    func standing(of channel: SecureChannel, expected: String?, address: String?) -> SessionMachine.PeerStanding {
        let device = channel.remoteDeviceID.compact
        // A connection to ourselves (an address of ours dialled as a peer's): no invitation.
        if device == identity.deviceID.compact { return .impersonation("\(address ?? channel.remoteDescription) is this node itself") }
        if let expected, expected != device {
            return .impersonation("expected \(displayID(expected).prefix(7)) at \(address ?? "?"), but \(channel.remoteDeviceID.shortID) answered with another key")
        }
        // Unreadable, a paired peer would be shown as an invitation, and a twin's name let through.
        let records: [PeerRecord]
        do throws(IndexError) { records = try index.peers() } catch { return .unreadable(error.description) }
        if let record = records.first(where: { $0.deviceID == device }), record.trust == .paired {
            return .paired
        }
        let name = channel.remoteHello.displayName
        // Compare names as people read them: case, surrounding spaces and compatibility forms
        // ("Ａlice", "alice ") do not make a different name.
        if let twin = records.first(where: { $0.trust == .paired && Self.sameName($0.name, name) && $0.deviceID != device }) {
            return .impersonation("'\(name)' is paired as \(displayID(twin.deviceID).prefix(7)) but presents a different key (\(channel.remoteDeviceID.shortID))")
        }
        return .unknown
    }
}
