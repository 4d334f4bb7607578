internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerIndex
internal import PeerNet
internal import Synchronization

/// The node's side of discovery: starting and stopping it, turning what the browser sees
/// into events, connecting paired peers that appear, `pair NAME`, `browse`, `visibility`,
/// and the discovered half of `peers`. The `NodeDiscovery` is in the node's `state` (a
/// `Mutex`), taken out to be used; what it reports hops to `queue`, where the connections
/// are reached.
extension Node {
    // MARK: Lifecycle (any thread but the queue)

    /// Starts advertising (TCP `port` on `host`, the listener's numeric address) and
    /// browsing when discovery is on. The mDNS sockets belong to the calling thread's
    /// network namespace.
    func startDiscovery(port: UInt16, host: String) throws(EngineError) {
        guard config.discovery else { return }
        let discovery = try NodeDiscovery(
            config: config, identity: identity, port: port, host: host,
            onRegistered: { [weak self] name in
                guard let node = self else { return }
                node.queue.async { node.discoveryRegistered(name) }
            },
            onChange: { [weak self] change in
                guard let node = self else { return }
                node.queue.async { node.discoveryChanged(change) }
            })
        state.withLock { $0.discovery = discovery }
        do { try discovery.start(visible: config.visible) } catch {
            state.withLock { $0.discovery = nil }
            throw error
        }
    }

    /// Says goodbye on the network (when visible) and closes the mDNS sockets.
    func stopDiscovery() {
        let discovery = state.withLock { state -> NodeDiscovery? in
            defer { state.discovery = nil }
            return state.discovery
        }
        discovery?.stop()
    }

    // MARK: Requests (any thread)

    /// Nearby syncpeer nodes (each instance once), as `browse` lists them.
    package func browse() throws(EngineError) -> [BrowsedPeer] {
        let result: Result<[BrowsedPeer], EngineError> = queue.sync {
            guard let discovery else { return .failure(Self.discoveryOff) }
            let peers: [PeerRecord]
            do throws(IndexError) { peers = try index.peers() } catch { return .failure(.index(error)) }
            let paired = Set(peers.filter { $0.trust == .paired }.map(\.deviceID))
            return .success(discovery.peers.compactMap { $0.browsed(paired: paired.contains($0.deviceKey)) })
        }
        return try result.get()
    }

    /// Shows (`true`) or hides (`false`) this node on the network, or only reports (nil).
    package func setVisibility(_ visible: Bool?) throws(EngineError) -> DiscoveryStatus {
        let result: Result<DiscoveryStatus, EngineError> = queue.sync {
            guard let discovery else { return .failure(Self.discoveryOff) }
            if let visible, visible != discovery.isVisible {
                discovery.setVisible(visible)
                emit(.visibility(.init(state: visible ? "visible" : "invisible", time: now())))
            }
            return .success(discoveryStatus())
        }
        return try result.get()
    }

    static let discoveryOff = EngineError.notFound("discovery is off (the daemon runs with --no-discovery)")

    /// Names of the nodes discovery sees nearby that are not paired (on the queue): what a
    /// name the user typed may mean ("carol is nearby but not paired").
    func nearbyUnpairedNames() -> [String] {
        // (An index that cannot say which are paired: no name is offered as a hint.)
        guard let discovery, let peers = try? index.peers() else { return [] }
        let paired = Set(peers.filter { $0.trust == .paired }.map(\.deviceID))
        return discovery.peers.filter { !paired.contains($0.deviceKey) }.compactMap { $0.browsed(paired: false)?.peer.name }
    }

    // MARK: On the queue

    /// Discovery facts for `status` and `visibility`.
    func discoveryStatus() -> DiscoveryStatus {
        guard let discovery else { return DiscoveryStatus(enabled: false) }
        return DiscoveryStatus(enabled: true, visible: discovery.isVisible, instance: discovery.registeredName,
                               serviceType: discovery.serviceType.description, interfaces: discovery.interfaces)
    }

    func discoveryRegistered(_ name: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !connections.stopped else { return }
        let renamed = name != identity.displayName
        emit(.registered(.init(instance: name, reason: renamed ? "the name '\(identity.displayName)' is taken on this network" : nil,
                               time: now())))
    }

    func discoveryChanged(_ change: NodeDiscovery.Change) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !connections.stopped else { return }
        switch change {
        case let .found(peer):
            if let ref = peer.ref {
                emit(.found(.init(peer: ref, instance: peer.label, address: peer.addresses.first, addresses: peer.addresses,
                                  port: Int(peer.port), info: peer.info, time: now())))
            }
            if let address = peer.addresses.first { connections.dialDiscovered(peer.deviceKey, at: address) }
        case let .updated(peer):
            // Back with a new address or port (after a crash, say): a pending redial goes there now.
            if let address = peer.addresses.first { connections.peerMoved(peer.deviceKey, to: address) }
        case let .lost(peer):
            if let ref = peer.ref { emit(.lost(.init(peer: ref, instance: peer.label, time: now()))) }
        }
    }

    /// Adds discovered peers to `peers`: `discovered` on every entry, and for a peer only
    /// discovered, a new entry with its address.
    func mergeDiscovered(into entries: inout [String: PeerSummary]) {
        guard let discovery else { return }
        for peer in discovery.peers {
            guard let ref = peer.ref else { continue }
            var entry = entries[peer.deviceKey]
                ?? PeerSummary(peer: ref, paired: false, state: .notConnected, addresses: [], discovered: false)
            entry.discovered = true
            entry.instance = peer.label
            if entry.address == nil { entry.address = peer.addresses.first }
            entries[peer.deviceKey] = entry
        }
    }

    /// Where `pair TEXT` dials: a discovered peer (by instance name, device ID or prefix),
    /// HOST:PORT, or a paired peer's last known address. The device ID it advertises (or
    /// was paired with) is expected, so another key answering there is refused.
    func pairTarget(_ text: String) -> Result<(address: String, expected: String?), EngineError> {
        let discovered = discovery?.peers ?? []
        let candidates = discovered.map {
            PeerResolver.Candidate(deviceID: $0.displayID, name: $0.label, addresses: $0.addresses)
        }
        do throws(PeerResolver.Failure) {
            switch try PeerResolver.resolve(text, among: candidates) {
            case let .address(address):
                return .success((address, nil))
            case let .peer(candidate):
                guard let address = candidate.addresses.first else {
                    return .failure(.notFound("\(candidate.name) was found but has no address yet; try again in a moment"))
                }
                return .success((address, candidate.deviceID.filter { $0 != "-" }))
            }
        } catch {
            if case .ambiguous = error { return .failure(.notFound(error.description)) }
        }
        // Not nearby: a paired peer at its last known address.
        let peers: [PeerRecord]
        do throws(IndexError) { peers = try index.peers() } catch { return .failure(.index(error)) }
        let paired = peers.filter { $0.trust == .paired }.map {
            PeerResolver.Candidate(deviceID: $0.deviceID, name: $0.name, addresses: $0.addresses)
        }
        if case let .peer(candidate)? = try? PeerResolver.resolve(text, among: paired), let address = candidate.addresses.first {
            return .success((address, candidate.deviceID))
        }
        let hint = discovery == nil ? "give HOST:PORT (discovery is off)" : "see 'syncpeer browse', or give HOST:PORT"
        return .failure(.notFound("no nearby or paired peer matches '\(text.trimmingSpaces())'; \(hint)"))
    }
}

/// Discovery as the connections see it (any thread: `NodeDiscovery` guards its own table):
/// nothing is held off, seen or nearby when it is off.
extension Node: NearbyPeers {
    func holdOff(_ device: String) { discovery?.holdOff(device) }
    func release(_ device: String) { discovery?.release(device) }
    func isHeldOff(_ device: String) -> Bool { discovery?.isHeldOff(device) ?? false }

    func addresses(of device: String) -> [String] {
        (discovery?.peers(device: device) ?? []).flatMap(\.addresses)
    }
}
