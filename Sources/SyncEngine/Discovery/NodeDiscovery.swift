internal import FoundationEssentials
internal import PeerCrypto
internal import PeerNet
internal import PeerWire
internal import Synchronization

// How the node uses discovery (DNS-SD over multicast DNS, `PeerNet/Discovery`):
//
//   advertiser ── publishes "<display name>._<type>._tcp.local": SRV (host, TCP listen port),
//                 TXT (id = compact device ID, v = protocol version, the user's info), A, AAAA
//                 (over IPv4 and IPv6 multicast)
//   browser ───── found / updated / lost ─▶ NodeDiscovery.table (by instance name)
//                                                 │ (node queue)
//                                                 ▼
//                 Node: events found / lost; a *paired* device found is dialled with its
//                 device ID expected (an impostor's key is refused as an impersonation);
//                 an unpaired one is only listed (`browse`, `peers`) until `pair NAME`.
//
// Discovery never decides trust: the TXT record is unauthenticated, so it only says where
// to dial; the Noise handshake and the pinned keys decide who answered.

/// A syncpeer node seen on the network.
struct DiscoveredPeer: Sendable, Equatable {
    /// The full instance name, e.g. "bob (2)._syncpeer._tcp.local".
    var instanceName: String
    /// The instance label people see, e.g. "bob (2)".
    var label: String
    /// The advertised device ID, compact (56 characters), as the index keys peers.
    var deviceKey: String
    /// The same in the dashed form users see.
    var displayID: String
    /// "a.b.c.d:port" for every advertised IPv4 address, then "[v6]:port" for every IPv6
    /// one (routable first, then link-local ones with their zone: "[fe80::1%eth0]:port").
    var addresses: [String]
    var port: UInt16
    var info: [String: String]
    var protocolVersion: Int?
}

extension NodeConfig {
    /// Checks the discovery settings (service type, discovery info) and says which rule a
    /// value breaks. The CLI calls it while parsing flags (exit 2); `Node.start` again.
    package func validateDiscovery() throws(EngineError) {
        _ = try discoverySettings()
    }

    func discoverySettings() throws(EngineError) -> (ServiceType, DiscoveryInfo) {
        let type: ServiceType
        do { type = try ServiceType(serviceType) } catch {
            throw .invalidArgument("--service-type '\(serviceType)': \(error.description)")
        }
        let info: DiscoveryInfo
        do { info = try DiscoveryInfo(discoveryInfo) } catch {
            throw .invalidArgument("--info: \(error.description)")
        }
        for name in interfaces where name.isEmpty || name.utf8.count > 15 || name.contains("/") || name.contains(" ") {
            throw .invalidArgument("--interface '\(name)': an interface name has 1 to 15 characters, without '/' or spaces")
        }
        return (type, info)
    }
}

/// The node's advertiser and browser, and the table of peers they found. The table is
/// under a `Mutex`; callbacks (`onChange`, `onRegistered`) run on the discovery threads
/// without the lock held, and the node hops to its own queue from them.
final class NodeDiscovery: Sendable {
    enum Change: Sendable {
        case found(DiscoveredPeer)
        case updated(DiscoveredPeer)
        case lost(DiscoveredPeer)
    }

    let serviceType: ServiceType
    let interfaces: [String]
    private let ownKey: String
    private let advertiser: ServiceAdvertiser
    private let browser: ServiceBrowser
    private let table = Table()
    /// Paired devices the user disconnected: not dialled when found, until the node
    /// restarts or they connect again (as for redials).
    private let heldOff = Mutex<Set<String>>([])

    /// The peers found, by instance name (shared with the browser's callback).
    final class Table: Sendable {
        let peers = Mutex<[String: DiscoveredPeer]>([:])
    }

    /// `host` is the numeric address the listener is bound to: it decides which families
    /// of addresses are published (both for the dual-stack "::", else its own family).
    init(config: NodeConfig, identity: Identity, port: UInt16, host: String,
         onRegistered: @escaping @Sendable (String) -> Void,
         onChange: @escaping @Sendable (Change) -> Void) throws(EngineError) {
        let (type, info) = try config.discoverySettings()
        let selection: InterfaceSelection = config.interfaces.isEmpty ? .automatic : .named(config.interfaces)
        let ownKey = identity.deviceID.compact
        var advertised = AdvertiserConfiguration(
            serviceType: type, displayName: identity.displayName, port: port, deviceID: ownKey,
            protocolVersion: Int(Hello.currentProtocolVersion), info: info, interfaces: selection)
        advertised.publishesIPv4 = host == "::" || !host.contains(":")
        advertised.publishesIPv6 = host.contains(":")
        if let ttl = config.mdnsRecordTTL {
            advertised.hostRecordTTL = ttl
            advertised.otherRecordTTL = ttl
        }
        serviceType = type
        interfaces = config.interfaces
        self.ownKey = ownKey
        let table = self.table
        let browser = ServiceBrowser(BrowserConfiguration(serviceType: type, interfaces: selection, ignoredDeviceID: ownKey)) { event in
            if let change = Self.apply(event, to: table, ownKey: ownKey) { onChange(change) }
        }
        self.browser = browser
        // Our own browser's queries name our instance as known: our responder leaves them be.
        let ownTTL = advertised.otherRecordTTL
        do {
            advertiser = try ServiceAdvertiser(advertised) { name in
                browser.setOwnInstance(name, ttl: ownTTL)
                onRegistered(name)
            }
        } catch {
            throw .invalidArgument("cannot advertise: \(error.description)")
        }
    }

    /// Opens the mDNS sockets (in the calling thread's network namespace) and starts
    /// browsing, and advertising when `visible`.
    func start(visible: Bool) throws(EngineError) {
        do throws(NetError) {
            try browser.start()
            do throws(NetError) { try advertiser.start(visible: visible) } catch {
                browser.stop()
                throw error
            }
        } catch {
            throw .network("cannot start discovery: \(error.description)")
        }
    }

    /// Says goodbye (when visible) and closes the sockets.
    func stop() {
        advertiser.stop()
        browser.stop()
    }

    func holdOff(_ deviceKey: String) { _ = heldOff.withLock { $0.insert(deviceKey) } }
    func release(_ deviceKey: String) { _ = heldOff.withLock { $0.remove(deviceKey) } }
    func isHeldOff(_ deviceKey: String) -> Bool { heldOff.withLock { $0.contains(deviceKey) } }

    func setVisible(_ visible: Bool) { advertiser.setVisible(visible) }
    var isVisible: Bool { advertiser.isVisible }
    var registeredName: String? { advertiser.registeredName }

    /// Every peer found, by instance name.
    var peers: [DiscoveredPeer] {
        table.peers.withLock { Array($0.values) }.sorted { ($0.label, $0.instanceName) < ($1.label, $1.instanceName) }
    }

    /// The peers found that advertise `deviceKey`.
    func peers(device deviceKey: String) -> [DiscoveredPeer] {
        peers.filter { $0.deviceKey == deviceKey }
    }

    /// Updates the table from a browser event; returns what changed for the node.
    private static func apply(_ event: DiscoveryEvent, to table: Table,
                              ownKey: String) -> Change? {
        switch event {
        case let .found(instance), let .updated(instance):
            // Not a syncpeer node (or not a well-formed one), or someone claiming our ID.
            guard let peer = peer(instance), peer.deviceKey != ownKey else { return nil }
            let previous = table.peers.withLock { t -> DiscoveredPeer? in
                defer { t[peer.instanceName] = peer }
                return t[peer.instanceName]
            }
            if previous == nil { return .found(peer) }
            return previous == peer ? nil : .updated(peer)
        case let .lost(name):
            return table.peers.withLock { $0.removeValue(forKey: name) }.map { .lost($0) }
        }
    }

    private static func peer(_ instance: ServiceInstance) -> DiscoveredPeer? {
        guard let id = try? DeviceID(parsing: instance.deviceID), instance.port != 0 else { return nil }
        return DiscoveredPeer(
            instanceName: instance.instanceName, label: instance.displayName, deviceKey: id.compact,
            displayID: id.description,
            addresses: instance.addresses.map { HostPort(host: $0.description, port: instance.port).description }
                + instance.ipv6Addresses.map { HostPort(host: $0.description, port: instance.port).description },
            port: instance.port, info: instance.info, protocolVersion: instance.protocolVersion)
    }
}

extension DiscoveredPeer {
    /// The peer as results and events show it (nil if its advertised ID does not parse,
    /// which discovery already refuses).
    var ref: PeerRef? {
        (try? DeviceID(parsing: displayID)).map { PeerRef(id: $0, name: label) }
    }

    /// The peer as `browse` lists it: the short instance name, as `peers` and events show it.
    func browsed(paired: Bool) -> BrowsedPeer? {
        guard let ref else { return nil }
        return BrowsedPeer(peer: ref, instance: label, address: addresses.first, addresses: addresses, port: Int(port),
                           info: info, version: protocolVersion.map { Int($0) }, paired: paired)
    }
}
