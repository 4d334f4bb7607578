internal import Glibc
internal import Synchronization

/// Publishes one service instance over mDNS (RFC 6762, RFC 6763): probes for a unique
/// instance name (renaming "name (2)", "name (3)"… on conflicts), announces, answers
/// queries (QM and QU, with known-answer suppression), defends its name and says
/// goodbye (TTL 0) when stopped or hidden.
///
/// Threads: `start()` creates the socket and one thread (receive + timers) as children of
/// the calling thread, so they live in the caller's network namespace.
///
/// Why it is `Sendable`: the configuration is immutable; everything that changes is in
/// `state` (a `Mutex`), touched by the loop thread and the public methods; packets are
/// built under the lock and sent after it is released, and callbacks run on the loop
/// thread without the lock held.
package final class ServiceAdvertiser: Sendable {
    package let configuration: AdvertiserConfiguration
    private let onNameRegistered: @Sendable (String) -> Void
    private let published: AdvertisedRecords
    private let state: Mutex<State>
    private let runtime = Mutex<Runtime?>(nil)

    private struct Runtime: Sendable {
        let socket: MDNSSocket
        let wake: WakePipe
        let thread: DiscoveryThread
    }

    private enum Phase: Equatable {
        case hidden
        case waiting(until: ContinuousClock.Instant)
        case probing(sent: Int, next: ContinuousClock.Instant)
        case announcing(sent: Int, next: ContinuousClock.Instant)
        case running

        /// Announced (or announcing): the records are out and must be defended and answered.
        var isPublished: Bool {
            switch self {
            case .announcing, .running: return true
            default: return false
            }
        }
    }

    private struct Pending {
        var at: ContinuousClock.Instant
        var bytes: [UInt8]
        var interfaceIndex: UInt32
        var family: MDNSFamily
        /// The `lastMulticast` keys of its records, set again when it actually goes out.
        var keys: [String]
    }

    /// A multicast to send: out of `interface`, over `family` (nil: each family it has).
    private typealias Multicast = (interface: MDNSInterface, family: MDNSFamily?, bytes: [UInt8])
    /// A unicast reply.
    private typealias Unicast = (address: MDNSAddress, port: UInt16, bytes: [UInt8])

    private struct State {
        var label: String
        var phase: Phase = .hidden
        var visible = true
        var stopping = false
        var registered: String?
        var interfaces: [MDNSInterface] = []
        var pending: [Pending] = []
        /// When each (record, interface, family) was last multicast, for QU replies (RFC 6762 §5.4).
        var lastMulticast: [String: ContinuousClock.Instant] = [:]
    }

    /// Creates an advertiser (nothing is sent before `start`). Throws when the display name
    /// is empty or longer than 63 bytes, or the host name is not a valid label.
    package init(_ configuration: AdvertiserConfiguration,
                onNameRegistered: @escaping @Sendable (String) -> Void = { _ in }) throws(DiscoveryRuleError) {
        let bytes = configuration.displayName.utf8.count
        if bytes == 0 || bytes > 63 { throw .displayNameLength(bytes) }
        self.configuration = configuration
        self.onNameRegistered = onNameRegistered
        let host = configuration.hostName ?? Self.derivedHostName(configuration.deviceID)
        if host.isEmpty || host.utf8.count > 63 || host.contains(".") { throw .hostNameInvalid(host) }
        published = AdvertisedRecords(configuration: configuration, hostName: DNSName(labels: [host, "local"]))
        state = Mutex(State(label: configuration.displayName))
    }

    static func derivedHostName(_ deviceID: String) -> String {
        let chars = deviceID.lowercased().filter { $0.isASCII && ($0.isLetter || $0.isNumber) }
        return "syncpeer-" + (chars.isEmpty ? "host" : String(chars.prefix(12)))
    }

    /// The instance name after probing (and renames), or nil while probing or hidden.
    package var registeredName: String? { state.withLock { $0.registered } }

    package var isVisible: Bool { state.withLock { $0.visible } }

    /// Opens the socket and starts probing (when `visible`). The socket and thread belong
    /// to the calling thread's network namespace.
    package func start(visible: Bool = true) throws(NetError) {
        let socket = try MDNSSocket(selection: configuration.interfaces)
        let wake: WakePipe
        do throws(NetError) { wake = try WakePipe() } catch { socket.close(); throw error }
        state.withLock { s in
            s.visible = visible
            s.interfaces = socket.interfaces
            s.phase = visible ? .waiting(until: .now + randomMilliseconds(0...250)) : .hidden
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

    /// Shows or hides the service at run time: hiding sends goodbyes and stops answering;
    /// showing probes and announces again.
    package func setVisible(_ visible: Bool) {
        let goodbye: [Multicast] = state.withLock { s in
            guard s.visible != visible else { return [] }
            s.visible = visible
            if visible {
                s.phase = .waiting(until: .now + randomMilliseconds(0...250))
                return []
            }
            let wasPublished = s.phase.isPublished
            s.phase = .hidden
            s.pending = []
            s.registered = nil
            return wasPublished ? goodbyePackets(s) : []
        }
        if let rt = runtime.withLock({ $0 }) {
            for m in goodbye { rt.socket.multicast(m.bytes, on: m.interface, family: m.family) }
            rt.wake.wake()
        }
    }

    /// Says goodbye (when published), stops the thread and closes the socket. Idempotent.
    /// Blocks until the goodbye has been sent; do not call it from `onNameRegistered`.
    package func stop() {
        state.withLock { $0.stopping = true }
        guard let rt = runtime.withLock({ rt -> Runtime? in defer { rt = nil }; return rt }) else { return }
        rt.wake.wake()
        rt.thread.join()
        let goodbye: [Multicast] = state.withLock { s in
            let published = s.phase.isPublished
            s.phase = .hidden
            s.registered = nil
            return published && s.visible ? goodbyePackets(s) : []
        }
        // Twice, 150 ms apart: a single lost packet (a busy receiver, a full queue) would
        // leave the service listed elsewhere until its records expire (RFC 6762 §10.1 lets
        // a goodbye be repeated; answers are idempotent). Seen under load: python-zeroconf
        // missed the one goodbye in 2 of 2 full test runs, never alone.
        for round in 0..<(goodbye.isEmpty ? 0 : 2) {
            if round > 0 { usleep(150_000) }
            for m in goodbye { rt.socket.multicast(m.bytes, on: m.interface, family: m.family) }
        }
        rt.socket.close()
    }

    deinit {
        stop()
    }

    // MARK: Records

    private func goodbyePackets(_ s: State) -> [Multicast] {
        s.interfaces.compactMap { interface in
            let message = DNSMessage.response(answers: published.allRecords(s.label, interface, ttl: 0))
            return (try? message.encoded()).map { (interface, nil, $0) }
        }
    }

    private func announcementPackets(_ s: inout State, now: ContinuousClock.Instant) -> [Multicast] {
        s.interfaces.flatMap { interface in
            MDNSFamily.allCases.compactMap { family -> Multicast? in
                // (Not a record an answer multicast, or will, within 1 s: RFC 6762 §6.)
                let records = published.allRecords(s.label, interface).filter {
                    !multicastRecently($0, interface.index, family, s, now)
                }
                guard !records.isEmpty else { return nil }
                for r in records { s.lastMulticast[key(r, interface.index, family)] = now }
                return (try? DNSMessage.response(answers: records).encoded()).map { (interface, family, $0) }
            }
        }
    }

    /// Whether `record` went (or is due to go) out by multicast on the interface over
    /// `family` less than `within` ago: RFC 6762 §6 allows one multicast of a record per
    /// second on an interface (probe defences aside).
    private func multicastRecently(_ record: DNSResourceRecord, _ index: UInt32, _ family: MDNSFamily, _ s: State,
                                   _ now: ContinuousClock.Instant, within: Duration = .seconds(1)) -> Bool {
        guard let last = s.lastMulticast[key(record, index, family)] else { return false }
        return now - last < within
    }

    /// A probe (RFC 6762 §8.1): a question for our name of type ANY, our proposed records in
    /// the authority section. Only the first asks for a unicast reply (QU): several sockets
    /// share port 5353 on a host, and a unicast datagram reaches only one of them.
    private func probePackets(_ s: State, first: Bool) -> [Multicast] {
        let name = published.instanceName(s.label)
        let message = DNSMessage.query([DNSQuestion(name: name, type: DNSRecordType.any, unicastResponse: first)],
                                       authorities: [published.srvRecord(s.label), published.txtRecord(s.label)])
        guard let bytes = try? message.encoded() else { return [] }
        return s.interfaces.map { ($0, nil, bytes) }
    }

    private func key(_ record: DNSResourceRecord, _ index: UInt32, _ family: MDNSFamily) -> String {
        "\(index)|\(family)|\(record.name)|\(record.type)|\(record.data.uncompressedBytes)"
    }

    // MARK: The loop

    private func run(socket: MDNSSocket, wake: WakePipe) {
        runMDNSLoop(
            socket: socket, wake: wake, refreshInterval: configuration.interfaceRefreshInterval,
            shouldStop: { state.withLock { $0.stopping } },
            onPacket: { packet in
                let (sends, unicast) = handle(packet)
                for m in sends { socket.multicast(m.bytes, on: m.interface, family: m.family) }
                for u in unicast { socket.send(u.bytes, to: u.address, port: u.port) }
            },
            onTick: { now in
                let (sends, registered) = tick(now)
                for m in sends { socket.multicast(m.bytes, on: m.interface, family: m.family) }
                if let registered { onNameRegistered(registered) }
            },
            onInterfacesChanged: {
                let interfaces = socket.interfaces
                state.withLock { s in
                    s.interfaces = interfaces
                    switch s.phase {
                    case .running, .announcing: s.phase = .announcing(sent: 0, next: .now)
                    default: break
                    }
                }
            })
    }

    private func tick(_ now: ContinuousClock.Instant) -> ([Multicast], String?) {
        state.withLock { s in
            var sends: [Multicast] = []
            var registered: String?
            switch s.phase {
            case .hidden, .running:
                break
            case let .waiting(until):
                if now >= until { s.phase = .probing(sent: 0, next: now) }
            case let .probing(sent, next):
                guard now >= next else { break }
                if sent == 3 {
                    s.registered = s.label
                    registered = s.label
                    s.phase = .announcing(sent: 0, next: now)
                } else {
                    sends += probePackets(s, first: sent == 0)
                    s.phase = .probing(sent: sent + 1, next: now + .milliseconds(250))
                }
            case let .announcing(sent, next):
                guard now >= next else { break }
                sends += announcementPackets(&s, now: now)
                s.phase = sent + 1 >= 2 ? .running : .announcing(sent: sent + 1, next: now + .seconds(1))
            }
            if !s.phase.isPublished { s.pending = [] }
            let due = s.pending.filter { $0.at <= now }
            s.pending.removeAll { $0.at <= now }
            for p in due {
                if let interface = s.interfaces.first(where: { $0.index == p.interfaceIndex }) {
                    sends.append((interface, p.family, p.bytes))
                    // (The next multicast of these records is a second from now, even when
                    // this one goes later than planned.)
                    for k in p.keys { s.lastMulticast[k] = now }
                }
            }
            return (sends, registered)
        }
    }

    /// Handles one datagram: conflict detection on responses, tie-breaks on probes, answers
    /// to queries. Returns multicasts to send now and unicast replies.
    private func handle(_ packet: MDNSPacket) -> ([Multicast], [Unicast]) {
        guard let message = try? DNSMessage.decodingTolerantly(packet.bytes).message, message.opcode == 0, message.rcode == 0 else {
            return ([], [])
        }
        let now = ContinuousClock.now
        return state.withLock { s in
            guard s.visible, !s.stopping,
                  let interface = s.interfaces.first(where: { $0.index == packet.interfaceIndex }) else { return ([], []) }
            let ours = published.instanceName(s.label)
            let mine = [published.srvRecord(s.label), published.txtRecord(s.label)]
            if message.isResponse {
                // Never answer a response; look for records that claim our name with other data.
                let conflict = message.answers.contains { r in
                    r.name == ours && r.ttl > 0 && (r.type == DNSRecordType.srv || r.type == DNSRecordType.txt)
                        && !mine.contains { $0.isSameRecord(as: r) }
                } || message.additionals.contains { r in
                    r.name == ours && r.ttl > 0 && r.type == DNSRecordType.srv && !mine.contains { $0.isSameRecord(as: r) }
                }
                guard conflict else { return ([], []) }
                switch s.phase {
                case .probing, .waiting:
                    rename(&s)
                    s.phase = .probing(sent: 0, next: now)
                case .announcing, .running:
                    // RFC 6762 §9: probe again; the probe then renames if the other holder answers.
                    s.registered = nil
                    s.phase = .probing(sent: 0, next: now + randomMilliseconds(0...250))
                case .hidden:
                    break
                }
                return ([], [])
            }
            // A query.
            if case .probing = s.phase {
                let theirs = message.authorities.filter { $0.name == ours }
                if message.questions.contains(where: { $0.name == ours }), !theirs.isEmpty,
                   !theirs.allSatisfy({ r in mine.contains { $0.isSameRecord(as: r) } }) {
                    if tieBreak(mine: mine, theirs: theirs) < 0 {
                        // We lost the simultaneous-probe tie-break (RFC 6762 §8.2): wait 1 s, probe again.
                        s.phase = .waiting(until: now + .seconds(1))
                    }
                }
                return ([], [])
            }
            guard s.phase.isPublished else {
                return ([], [])
            }
            return answer(message, packet: packet, interface: interface, state: &s, now: now)
        }
    }

    /// Compares record sets as RFC 6762 §8.2 says: sorted by class, type, then rdata bytes;
    /// pairwise; the first difference decides; a longer list wins when one is a prefix.
    private func tieBreak(mine: [DNSResourceRecord], theirs: [DNSResourceRecord]) -> Int {
        func sortKey(_ r: DNSResourceRecord) -> [UInt8] {
            [UInt8(r.recordClass >> 8), UInt8(r.recordClass & 0xFF), UInt8(r.type >> 8), UInt8(r.type & 0xFF)]
                + r.data.uncompressedBytes
        }
        let a = mine.map(sortKey).sorted { $0.lexicographicallyPrecedes($1) }
        let b = theirs.map(sortKey).sorted { $0.lexicographicallyPrecedes($1) }
        for (x, y) in zip(a, b) where x != y {
            return x.lexicographicallyPrecedes(y) ? -1 : 1
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    private func rename(_ s: inout State) {
        var base = s.label
        var number = 2
        if base.hasSuffix(")"), let open = base.lastIndex(of: "("), open > base.startIndex,
           base[base.index(before: open)] == " ",
           let n = Int(base[base.index(after: open)..<base.index(before: base.endIndex)]), n >= 2 {
            number = n + 1
            base = String(base[..<base.index(before: open)])
        }
        let suffix = " (\(number))"
        while base.utf8.count + suffix.utf8.count > 63 { base.removeLast() }
        s.label = base + suffix
    }

    /// Answers a query over the family it came by (to the group, or unicast when asked).
    private func answer(_ query: DNSMessage, packet: MDNSPacket, interface: MDNSInterface,
                        state s: inout State, now: ContinuousClock.Instant) -> ([Multicast], [Unicast]) {
        let family = packet.source.family
        let records = published.allRecords(s.label, interface)
        var answers: [DNSResourceRecord] = []
        var unicastWanted = true
        for question in query.questions where question.recordClass == dnsClassIN || question.recordClass == 255 {
            let matching = records.filter { question.isAnswered(by: $0) }
            if !matching.isEmpty && !question.unicastResponse { unicastWanted = false }
            for r in matching where !answers.contains(r) { answers.append(r) }
        }
        // Known-answer suppression (RFC 6762 §7.1).
        answers.removeAll { r in
            query.answers.contains { $0.isSameRecord(as: r) && $0.ttl >= r.ttl / 2 }
        }
        guard !answers.isEmpty else { return ([], []) }
        var additionals: [DNSResourceRecord] = []
        func addAdditional(_ r: DNSResourceRecord) {
            if !answers.contains(r), !additionals.contains(r) { additionals.append(r) }
        }
        for r in answers {
            switch r.data {
            case .ptr where r.name == configuration.serviceType.domain:
                addAdditional(published.srvRecord(s.label)); addAdditional(published.txtRecord(s.label))
                published.addressRecords(interface).forEach(addAdditional)
            case .srv:
                published.addressRecords(interface).forEach(addAdditional)
            default: break
            }
        }
        if packet.sourcePort != mdnsPort {
            // Legacy unicast (RFC 6762 §6.7): echo the ID and questions, no cache-flush, TTL ≤ 10 s.
            func legacy(_ r: DNSResourceRecord) -> DNSResourceRecord {
                var r = r; r.cacheFlush = false; r.ttl = min(r.ttl, 10); return r
            }
            var reply = DNSMessage.response(answers: answers.map(legacy), additionals: additionals.map(legacy))
            reply.id = query.id
            reply.questions = query.questions.map { var q = $0; q.unicastResponse = false; return q }
            guard let bytes = try? reply.encoded() else { return ([], []) }
            return ([], [(packet.source, packet.sourcePort, bytes)])
        }
        guard let bytes = try? DNSMessage.response(answers: answers, additionals: additionals).encoded() else { return ([], []) }
        let unicast: [Unicast] = unicastWanted ? [(packet.source, packet.sourcePort, bytes)] : []
        let isProbe = !query.authorities.isEmpty
        if isProbe {
            // A defence goes both ways, at once: it must reach the prober whichever socket
            // it uses (several share port 5353 on a host, and a unicast reaches only one).
            for r in answers + additionals { s.lastMulticast[key(r, interface.index, family)] = now }
            return ([(interface, family, bytes)], unicast)
        }
        // At most one multicast of a record per second on an interface (RFC 6762 §6): what
        // went out (or is due to) within the last second is left out.
        let multicastAnswers = answers.filter { !multicastRecently($0, interface.index, family, s, now) }
        if unicastWanted {
            // A QU question is answered by unicast, or instead by multicast when a record
            // was not multicast within a quarter of its TTL (RFC 6762 §5.4), never both.
            let stale = multicastAnswers.contains { multicastRecently($0, interface.index, family, s, now, within: .seconds(Int($0.ttl) / 4)) == false }
            guard stale else { return ([], unicast) }
        }
        guard !multicastAnswers.isEmpty else { return ([], []) }
        let multicastAdditionals = additionals.filter { !multicastRecently($0, interface.index, family, s, now) }
        guard let multicastBytes = try? DNSMessage.response(answers: multicastAnswers, additionals: multicastAdditionals).encoded() else {
            return ([], [])
        }
        // Shared records wait a random 20–120 ms (RFC 6762 §6); the time they go out is the
        // one the next answer is spaced from.
        let at = multicastAnswers.contains { !$0.cacheFlush } ? now + randomMilliseconds(20...120) : now
        let keys = (multicastAnswers + multicastAdditionals).map { key($0, interface.index, family) }
        for k in keys { s.lastMulticast[k] = at }
        if at > now {
            s.pending.append(Pending(at: at, bytes: multicastBytes, interfaceIndex: interface.index, family: family, keys: keys))
            return ([], [])
        }
        return ([(interface, family, multicastBytes)], [])
    }
}
