internal import Synchronization

/// A service instance found by a `ServiceBrowser`.
package struct ServiceInstance: Hashable, Sendable {
    /// The full instance name, e.g. "Alice's laptop._syncpeer._tcp.local".
    package var instanceName: String
    /// The user-visible part (the first label), e.g. "Alice's laptop".
    package var displayName: String
    /// The `id` TXT value (empty when absent).
    package var deviceID: String
    /// The `v` TXT value (nil when absent or not a number).
    package var protocolVersion: Int?
    package var port: UInt16
    /// The SRV target, e.g. "syncpeer-abc.local".
    package var hostName: String
    /// IPv4 addresses of the host (A records), sorted.
    package var addresses: [IPv4Address]
    /// IPv6 addresses of the host (AAAA records), routable ones first; a link-local one
    /// carries the name of the interface it was heard on as its zone ("fe80::1%eth0").
    package var ipv6Addresses: [IPv6Address] = []
    /// The other TXT pairs (everything but `id` and `v`).
    package var info: [String: String]

    package init(instanceName: String, displayName: String, deviceID: String, protocolVersion: Int?, port: UInt16,
                hostName: String, addresses: [IPv4Address], ipv6Addresses: [IPv6Address] = [], info: [String: String]) {
        self.instanceName = instanceName
        self.displayName = displayName
        self.deviceID = deviceID
        self.protocolVersion = protocolVersion
        self.port = port
        self.hostName = hostName
        self.addresses = addresses
        self.ipv6Addresses = ipv6Addresses
        self.info = info
    }
}

/// What a `ServiceBrowser` reports.
package enum DiscoveryEvent: Hashable, Sendable {
    case found(ServiceInstance)
    /// Port, addresses or TXT changed.
    case updated(ServiceInstance)
    /// The instance is gone (goodbye, or its records expired). The full instance name.
    case lost(instanceName: String)
}

package struct BrowserConfiguration: Sendable {
    package var serviceType: ServiceType
    package var interfaces: InterfaceSelection
    /// Instances whose `id` is this are never reported (the caller's own advertiser).
    package var ignoredDeviceID: String?
    /// The longest interval between PTR queries (RFC 6762 §5.2: at most 60 minutes; 60 s here).
    package var maxQueryInterval: Duration
    package var interfaceRefreshInterval: Duration

    package init(serviceType: ServiceType, interfaces: InterfaceSelection = .automatic,
                ignoredDeviceID: String? = nil, maxQueryInterval: Duration = .seconds(60),
                interfaceRefreshInterval: Duration = .seconds(5)) {
        self.serviceType = serviceType
        self.interfaces = interfaces
        self.ignoredDeviceID = ignoredDeviceID
        self.maxQueryInterval = maxQueryInterval
        self.interfaceRefreshInterval = interfaceRefreshInterval
    }
}

/// Browses for one service type over mDNS (continuous querying, RFC 6762 §5.2): PTR
/// queries at 1 s, 2 s, 4 s … up to `maxQueryInterval`, with known answers; a record
/// cache with TTL expiry, cache-flush and goodbye handling (RFC 6762 §10.1–10.2); cache
/// refresh queries at 80–95 % of a TTL; SRV/TXT/A queries for what is missing; and
/// found/updated/lost events.
///
/// Threads: `start()` creates the socket and one thread (receive + timers) as children of
/// the calling thread (so in its network namespace); events arrive on that thread.
///
/// Why it is `Sendable`: the configuration is immutable; the cache and everything else
/// that changes is in `state` (a `Mutex`); packets are built under the lock and sent after;
/// the event callback runs without the lock held.
package final class ServiceBrowser: Sendable {
    package let configuration: BrowserConfiguration
    private let onEvent: @Sendable (DiscoveryEvent) -> Void
    private let state = Mutex(State())
    private let runtime = Mutex<Runtime?>(nil)

    private struct Runtime: Sendable {
        let socket: MDNSSocket
        let wake: WakePipe
        let thread: DiscoveryThread
    }

    private struct RecordKey: Hashable {
        var name: DNSName
        var data: DNSRecordData
    }

    private struct Entry {
        var record: DNSResourceRecord
        var received: ContinuousClock.Instant
        var expires: ContinuousClock.Instant
        /// How many of the 80/85/90/95 % refresh queries went out.
        var refreshes = 0
        /// A random 0–2 % added to each refresh point (RFC 6762 §5.2).
        var jitter: Double
        /// The interface it was last heard on (the zone of a link-local AAAA).
        var interfaceIndex: UInt32
    }

    private struct State {
        var stopping = false
        var cache: [RecordKey: Entry] = [:]
        var reported: [DNSName: ServiceInstance] = [:]
        var nextQuery: ContinuousClock.Instant = .now
        var queryInterval: Duration = .seconds(1)
        /// Resolve questions: when next to ask and the current back-off.
        var resolving: [DNSQuestion: (next: ContinuousClock.Instant, interval: Duration)] = [:]
        /// The resolve questions the last evaluation still needed.
        var wanted: Set<DNSQuestion> = []
        var interfaces: [MDNSInterface] = []
        /// The PTR record of the instance this node publishes, a known answer of every query.
        var own: DNSResourceRecord?
    }

    /// The most records kept (a flood of unrelated records cannot grow memory without bound).
    static let maxCacheEntries = 2_000

    package init(_ configuration: BrowserConfiguration, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        self.configuration = configuration
        self.onEvent = onEvent
    }

    /// Names the instance this node publishes itself (`label`, as registered; nil: none).
    /// Its PTR record goes as a known answer in every PTR query, so that this node's own
    /// responder does not answer this node's own question (RFC 6762 §7.1): that answer
    /// told nobody anything, and it multicast the PTR record again within a second of its
    /// announcement. `ttl` is the TTL the responder publishes the record with.
    package func setOwnInstance(_ label: String?, ttl: UInt32) {
        let own = label.map {
            DNSResourceRecord(name: serviceDomain, data: .ptr(DNSName(labelBytes: [Array($0.utf8)] + serviceDomain.labels)), ttl: ttl)
        }
        state.withLock { $0.own = own }
    }

    /// The instances currently known (as last reported).
    package var instances: [ServiceInstance] {
        state.withLock { Array($0.reported.values) }.sorted { $0.instanceName < $1.instanceName }
    }

    /// Opens the socket and starts querying; the socket and thread belong to the calling
    /// thread's network namespace.
    package func start() throws(NetError) {
        let socket = try MDNSSocket(selection: configuration.interfaces)
        let wake: WakePipe
        do throws(NetError) { wake = try WakePipe() } catch { socket.close(); throw error }
        state.withLock { s in
            s.interfaces = socket.interfaces
            s.nextQuery = .now + randomMilliseconds(20...120)
            s.queryInterval = .seconds(1)
        }
        let thread: DiscoveryThread
        do throws(NetError) {
            thread = try DiscoveryThread { [self] in self.run(socket: socket, wake: wake) }
        } catch {
            socket.close()
            throw error
        }
        runtime.withLock { $0 = Runtime(socket: socket, wake: wake, thread: thread) }
    }

    /// Stops querying and closes the socket (no events after it returns, unless called
    /// from the event callback itself). Idempotent.
    package func stop() {
        state.withLock { $0.stopping = true }
        guard let rt = runtime.withLock({ rt -> Runtime? in defer { rt = nil }; return rt }) else { return }
        rt.wake.wake()
        rt.thread.join()
        rt.socket.close()
    }

    deinit {
        stop()
    }

    private var serviceDomain: DNSName { configuration.serviceType.domain }

    private func run(socket: MDNSSocket, wake: WakePipe) {
        runMDNSLoop(
            socket: socket, wake: wake, refreshInterval: configuration.interfaceRefreshInterval,
            shouldStop: { state.withLock { $0.stopping } },
            onPacket: { packet in
                let events = receive(packet)
                deliver(events)
            },
            onTick: { now in
                let (queries, events) = tick(now)
                for (interface, bytes) in queries { socket.multicast(bytes, on: interface) }
                deliver(events)
            },
            onInterfacesChanged: {
                let interfaces = socket.interfaces
                state.withLock { s in
                    s.interfaces = interfaces
                    // New links may have new peers: query soon again.
                    s.queryInterval = .seconds(1)
                    s.nextQuery = .now + randomMilliseconds(20...120)
                }
            })
    }

    private func deliver(_ events: [DiscoveryEvent]) {
        for event in events where !state.withLock({ $0.stopping }) { onEvent(event) }
    }

    private func receive(_ packet: MDNSPacket) -> [DiscoveryEvent] {
        guard let message = try? DNSMessage.decodingTolerantly(packet.bytes).message, message.isResponse,
              message.opcode == 0, message.rcode == 0 else { return [] }
        let now = ContinuousClock.now
        return state.withLock { s -> [DiscoveryEvent] in
            guard !s.stopping, s.interfaces.contains(where: { $0.index == packet.interfaceIndex }) else { return [] }
            let records = message.answers + message.additionals
            // Records we care about: our PTR, SRV/TXT of instances of our type, then A/AAAA
            // of the hosts those SRV records name (here or in the cache).
            var hosts = Set(s.cache.values.compactMap { e -> DNSName? in
                if case let .srv(_, _, _, target) = e.record.data { return target }
                return nil
            })
            var relevant: [DNSResourceRecord] = []
            for r in records {
                switch r.data {
                case .ptr where r.name == serviceDomain: relevant.append(r)
                case let .srv(_, _, _, target) where r.name.parent == serviceDomain:
                    relevant.append(r); hosts.insert(target)
                case .txt where r.name.parent == serviceDomain: relevant.append(r)
                default: break
                }
            }
            for r in records where (r.type == DNSRecordType.a || r.type == DNSRecordType.aaaa) && hosts.contains(r.name) {
                relevant.append(r)
            }
            for r in relevant { insert(r, now: now, interfaceIndex: packet.interfaceIndex, into: &s) }
            return evaluate(now: now, state: &s)
        }
    }

    private func insert(_ r: DNSResourceRecord, now: ContinuousClock.Instant, interfaceIndex: UInt32, into s: inout State) {
        let key = RecordKey(name: r.name, data: r.data)
        if r.cacheFlush {
            // RFC 6762 §10.2: others of this name and type, older than 1 s, expire in 1 s.
            for (k, e) in s.cache where k != key && k.name == r.name && k.data.type == r.type
                && now - e.received > .seconds(1) && e.expires > now + .seconds(1) {
                s.cache[k]?.expires = now + .seconds(1)
            }
        }
        if r.ttl == 0 {
            // Goodbye (RFC 6762 §10.1): keep it one more second.
            if s.cache[key] != nil { s.cache[key]!.expires = min(s.cache[key]!.expires, now + .seconds(1)) }
            return
        }
        if s.cache[key] == nil, s.cache.count >= Self.maxCacheEntries { return }
        s.cache[key] = Entry(record: r, received: now, expires: now + .seconds(Int(r.ttl)),
                             jitter: Double.random(in: 0...0.02), interfaceIndex: interfaceIndex)
        s.resolving[DNSQuestion(name: r.name, type: r.type)] = nil
    }

    /// Drops expired records and reports what changed; schedules resolve queries.
    private func evaluate(now: ContinuousClock.Instant, state s: inout State) -> [DiscoveryEvent] {
        s.cache = s.cache.filter { $0.value.expires > now }
        s.wanted = []
        defer { s.resolving = s.resolving.filter { s.wanted.contains($0.key) } }
        var byName: [DNSName: [DNSResourceRecord]] = [:]
        var ipv6ByHost: [DNSName: Set<IPv6Address>] = [:]
        let interfaceNames = Dictionary(s.interfaces.map { ($0.index, $0.name) }, uniquingKeysWith: { a, _ in a })
        for e in s.cache.values {
            byName[e.record.name, default: []].append(e.record)
            if case let .aaaa(bytes) = e.record.data, let address = IPv6Address(bytes: bytes) {
                ipv6ByHost[e.record.name, default: []].insert(address.scoped(to: interfaceNames[e.interfaceIndex]))
            }
        }
        var current: [DNSName: ServiceInstance] = [:]
        let instanceNames = (byName[serviceDomain] ?? []).compactMap { r -> DNSName? in
            if case let .ptr(target) = r.data, target.parent == serviceDomain, !target.labels.isEmpty { return target }
            return nil
        }
        for name in Set(instanceNames) {
            let records = byName[name] ?? []
            let srv = records.compactMap { r -> (UInt16, DNSName)? in
                if case let .srv(_, _, port, target) = r.data { return (port, target) }
                return nil
            }.first
            let txt = records.compactMap { r -> [[UInt8]]? in
                if case let .txt(strings) = r.data { return strings }
                return nil
            }.first
            guard let (port, host) = srv else {
                ask(DNSQuestion(name: name, type: DNSRecordType.srv), now: now, state: &s)
                continue
            }
            guard let txt else {
                ask(DNSQuestion(name: name, type: DNSRecordType.txt), now: now, state: &s)
                continue
            }
            let addresses = (byName[host] ?? []).compactMap { r -> IPv4Address? in
                if case let .a(address) = r.data { return address }
                return nil
            }.sorted()
            let ipv6Addresses = (ipv6ByHost[host] ?? []).sorted()
            guard !addresses.isEmpty || !ipv6Addresses.isEmpty else {
                ask(DNSQuestion(name: host, type: DNSRecordType.a), now: now, state: &s)
                ask(DNSQuestion(name: host, type: DNSRecordType.aaaa), now: now, state: &s)
                continue
            }
            var pairs = txtDictionary(txt)
            let idKey = pairs.keys.first { $0.lowercased() == "id" }
            let vKey = pairs.keys.first { $0.lowercased() == "v" }
            let deviceID = idKey.flatMap { pairs[$0] } ?? ""
            let version = vKey.flatMap { pairs[$0] }.flatMap { Int($0) }
            if let idKey { pairs[idKey] = nil }
            if let vKey { pairs[vKey] = nil }
            if let ignored = configuration.ignoredDeviceID, deviceID == ignored { continue }
            let hostText = host.description
            current[name] = ServiceInstance(instanceName: name.description, displayName: name.firstLabel,
                                            deviceID: deviceID, protocolVersion: version, port: port,
                                            hostName: hostText, addresses: addresses, ipv6Addresses: ipv6Addresses,
                                            info: pairs)
        }
        var events: [DiscoveryEvent] = []
        for (name, instance) in current.sorted(by: { $0.value.instanceName < $1.value.instanceName }) {
            if let old = s.reported[name] {
                if old != instance { events.append(.updated(instance)) }
            } else {
                events.append(.found(instance))
            }
        }
        for (name, old) in s.reported where current[name] == nil {
            events.append(.lost(instanceName: old.instanceName))
        }
        s.reported = current
        return events
    }

    private func ask(_ question: DNSQuestion, now: ContinuousClock.Instant, state s: inout State) {
        s.wanted.insert(question)
        if s.resolving[question] == nil { s.resolving[question] = (next: now, interval: .seconds(1)) }
    }

    private func tick(_ now: ContinuousClock.Instant) -> ([(MDNSInterface, [UInt8])], [DiscoveryEvent]) {
        state.withLock { s in
            let events = evaluate(now: now, state: &s)
            var questions: [DNSQuestion] = []
            var knownAnswers: [DNSResourceRecord] = []
            if now >= s.nextQuery {
                questions.append(DNSQuestion(name: serviceDomain, type: DNSRecordType.ptr))
                // Known answers: our PTRs with more than half their TTL left (RFC 6762 §7.1).
                for e in s.cache.values where e.record.name == serviceDomain && e.record.type == DNSRecordType.ptr {
                    let left = e.expires - now
                    if left > .seconds(Double(e.record.ttl) / 2) {
                        var r = e.record
                        r.ttl = UInt32(max(0, left.components.seconds))
                        r.cacheFlush = false
                        knownAnswers.append(r)
                    }
                }
                if let own = s.own, !knownAnswers.contains(where: { $0.data == own.data }) { knownAnswers.append(own) }
                s.nextQuery = now + s.queryInterval
                s.queryInterval = min(s.queryInterval * 2, configuration.maxQueryInterval)
            }
            // Cache refresh at 80, 85, 90, 95 % of the TTL (plus jitter).
            for (key, e) in s.cache where e.refreshes < 4 {
                let ttl = Double(e.record.ttl)
                let point = e.received + .seconds(ttl * (0.80 + 0.05 * Double(e.refreshes) + e.jitter))
                if now >= point {
                    s.cache[key]!.refreshes += 1
                    let q = DNSQuestion(name: e.record.name, type: e.record.type)
                    if !questions.contains(q) { questions.append(q) }
                }
            }
            for (q, plan) in s.resolving where now >= plan.next {
                if !questions.contains(q) { questions.append(q) }
                s.resolving[q] = (next: now + plan.interval, interval: min(plan.interval * 2, configuration.maxQueryInterval))
            }
            guard !questions.isEmpty,
                  let bytes = try? DNSMessage.query(questions, knownAnswers: knownAnswers).encoded() else {
                return ([], events)
            }
            return (s.interfaces.map { ($0, bytes) }, events)
        }
    }
}
