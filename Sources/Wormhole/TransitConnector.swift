internal import Dispatch
internal import FoundationEssentials
package import PeerCrypto
internal import PeerNet
internal import Synchronization

/// Opens the Transit connection: tries every direct hint of the peer and every relay at
/// once, each on its own thread; the first that completes the handshake wins and the
/// rest are closed (magic-wormhole docs/transit.md).
///
///     [relay only]  → "please relay TOKEN for side SIDE\n"      ← "ok\n"
///     sender        → "transit sender HEX ready\n\n"            ← "transit receiver HEX ready\n\n"
///     sender        → "go\n" on the first, "nevermind\n" on the others
///     receiver      waits for "go\n"
package struct TransitConnector: Sendable {
    package let key: SecureBytes
    package let isSender: Bool
    package let relays: [TransitHints.Address]
    package let connectTimeout: Duration

    package init(key: SecureBytes, isSender: Bool, relays: [TransitHints.Address], connectTimeout: Duration = .seconds(10)) {
        self.key = key
        self.isSender = isSender
        self.relays = relays
        self.connectTimeout = connectTimeout
    }

    /// Our hints: no direct address (we do not listen), the relay.
    package var ourHints: TransitHints { TransitHints(direct: [], relays: relays) }

    func derive(_ purpose: String) -> SecureBytes { HKDFSHA256.derive(inputKeyMaterial: key, info: Array(purpose.utf8), length: 32) }

    func handshake(sender: Bool) -> [UInt8] {
        Array("transit \(sender ? "sender" : "receiver") \(hex(derive(sender ? "transit_sender" : "transit_receiver").unsafeCopy())) ready\n\n".utf8)
    }

    func relayHandshake(side: String) -> [UInt8] {
        Array("please relay \(hex(derive("transit_relay_token").unsafeCopy())) for side \(side)\n".utf8)
    }

    private final class Race: Sendable {
        struct State {
            var winner: TransitConnection?
            var open: [TCPConnection] = []
            var running = 0
            var failures: [String] = []
        }
        let state = Mutex(State())
        let done = DispatchSemaphore(value: 0)
    }

    /// Connects to the peer with its `peer` hints, within `timeout`.
    package func connect(peer: TransitHints, timeout: Duration = .seconds(60)) throws(WormholeError) -> TransitConnection {
        let side = hex(secureRandomBytes(8))
        var targets = peer.direct.map { ($0, false) }
        for relay in relays + peer.relays where !targets.contains(where: { $0.0 == relay && $0.1 }) { targets.append((relay, true)) }
        guard !targets.isEmpty else { throw .transfer("no way to reach the other side: no direct hints and no transit relay") }
        let race = Race()
        let deadline = ContinuousClock.now + timeout
        race.state.withLock { $0.running = targets.count }
        for (address, viaRelay) in targets {
            OSThread.start(name: "wormhole-transit") { [self] in
                let outcome = Result { () throws(WormholeError) in
                    try attempt(address, viaRelay: viaRelay, side: side, race: race, deadline: deadline)
                }
                race.state.withLock { state in
                    state.running -= 1
                    if case let .failure(error) = outcome { state.failures.append("\(address.host):\(address.port): \(error)") }
                    if state.running == 0 || state.winner != nil { race.done.signal() }
                }
            }
        }
        while true {
            race.done.wait()
            let (winner, running, failures, others) = race.state.withLock { ($0.winner, $0.running, $0.failures, $0.open) }
            if let winner {
                for connection in others { connection.close() }
                return winner
            }
            if running == 0 { throw .transfer("could not reach the other side: \(failures.prefix(4).joined(separator: "; "))") }
        }
    }

    private func attempt(_ address: TransitHints.Address, viaRelay: Bool, side: String, race: Race, deadline: ContinuousClock.Instant) throws(WormholeError) {
        let stream: TCPConnection
        do { stream = try TCPConnection.connect(host: address.host, port: address.port, timeout: connectTimeout) } catch {
            throw .transfer("\(error)")
        }
        let stillWanted = race.state.withLock { state in
            if state.winner == nil { state.open.append(stream) }
            return state.winner == nil
        }
        guard stillWanted else { stream.close(); return }
        var buffer: [UInt8] = []
        func expect(_ text: [UInt8]) throws(WormholeError) {
            while buffer.count < text.count {
                guard buffer == Array(text.prefix(buffer.count)) else { throw .protocolViolation("transit handshake mismatch") }
                let more: [UInt8]
                do { more = try stream.read(maxCount: text.count - buffer.count, deadline: deadline) } catch { throw .transfer("\(error)") }
                guard !more.isEmpty else { throw .transfer("closed during the transit handshake") }
                buffer += more
            }
            guard Array(buffer.prefix(text.count)) == text else { throw .protocolViolation("transit handshake mismatch") }
            buffer.removeFirst(text.count)
        }
        do {
            if viaRelay {
                try stream.write(relayHandshake(side: side))
                try expect(Array("ok\n".utf8))
            }
            try stream.write(handshake(sender: isSender))
            try expect(handshake(sender: !isSender))
            if isSender {
                let won = race.state.withLock { state -> Bool in
                    guard state.winner == nil else { return false }
                    state.open.removeAll { $0 === stream }
                    return true
                }
                guard won else { try? stream.write(Array("nevermind\n".utf8)); stream.close(); return }
                try stream.write(Array("go\n".utf8))
            } else {
                try expect(Array("go\n".utf8))
            }
            let connection = try TransitConnection(stream: stream, sendKey: derive(isSender ? "transit_record_sender_key" : "transit_record_receiver_key"),
                                                   receiveKey: derive(isSender ? "transit_record_receiver_key" : "transit_record_sender_key"),
                                                   description: "\(viaRelay ? "relay" : "direct") \(address.host):\(address.port)", leftover: buffer)
            let kept = race.state.withLock { state -> Bool in
                if isSender { state.winner = connection; return true }
                guard state.winner == nil else { return false }
                state.open.removeAll { $0 === stream }
                state.winner = connection
                return true
            }
            if !kept { stream.close() }
        } catch let error as WormholeError {
            stream.close()
            throw error
        } catch {
            stream.close()
            throw .transfer("\(error)")
        }
    }
}
