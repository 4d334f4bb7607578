package import PeerCrypto
internal import Glibc

/// A relay (Syncthing's `strelaysrv`, Relay Protocol v1) as a URL names it:
/// `relay://HOST:PORT/?id=RELAY-CERTIFICATE-ID`; the relay is pinned by that ID.
package struct RelayEndpoint: Sendable, Hashable, CustomStringConvertible {
    package let host: String
    package let port: UInt16
    package let id: CertificateID

    package init(host: String, port: UInt16, id: CertificateID) {
        self.host = host
        self.port = port
        self.id = id
    }

    package var description: String {
        "relay://\(host.contains(":") ? "[\(host)]" : host):\(port)/?id=\(id)"
    }
}

/// The client side of the relay protocol. Two kinds of connection to the relay's one port:
/// - protocol mode (TLS with our certificate, ALPN `bep-relay`): a member joins
///   (`JoinRelayRequest` → `Response` 0) and waits for `SessionInvitation`s; a device that
///   wants to reach a member sends `ConnectRequest(member ID)` and is invited too;
/// - session mode (plain TCP): each side sends `JoinSessionRequest(key)`, and after
///   `Response` 0 the relay copies bytes between the two. The Noise session runs in that
///   stream end to end: the relay sees only ciphertext, and cannot be the peer.
/// Every wait has a deadline; a relay that lies (an invitation for another device, garbage,
/// silence, "full") gets a `NetError` saying so.
package enum RelayClient {
    package static let alpn = ["bep-relay"]

    /// Joins `relay` as a member (we receive invitations from it).
    package static func join(_ relay: RelayEndpoint, identity: TLSIdentity, timeout: Duration) throws(NetError) -> RelayMembership {
        let stream = try connect(relay, identity: identity, timeout: timeout)
        do {
            try stream.write(RelayMessage.joinRelayRequest.encode())
            try expectSuccess(from: stream, deadline: .now + timeout, doing: "joining")
        } catch {
            stream.close()
            throw error
        }
        return RelayMembership(stream: stream, relay: relay)
    }

    /// Reaches the member `peer` through the first of `relays` that works: each is asked for
    /// a session and the session joined, within `timeout`; one that refuses, lies or stays
    /// silent is passed over for the next. Fails with the last relay's reason (and how many
    /// were tried) when none works.
    package static func session(with peer: CertificateID, through relays: [RelayEndpoint], identity: TLSIdentity,
                               timeout: Duration) throws(NetError) -> (stream: TCPConnection, relay: RelayEndpoint) {
        var failure = NetError.unreachable(address: peer.description, reason: "no relay to reach it through")
        for relay in relays {
            for attempt in 1...sessionAttempts {
                do throws(NetError) {
                    let invitation = try requestSession(with: peer, at: relay, identity: identity, timeout: timeout)
                    return (try joinSession(invitation, relay: relay, timeout: timeout), relay)
                } catch {
                    failure = error
                    // strelaysrv's race (below): a new session, after a pause, usually works.
                    guard error == Self.sessionNotReady(relay), attempt < sessionAttempts else { break }
                    usleep(UInt32(200_000 * attempt))
                }
            }
        }
        guard relays.count > 1 else { throw failure }
        throw .unreachable(address: peer.description, reason: "none of \(relays.count) relays could reach it; the last: \(failure.description)")
    }

    /// strelaysrv hands a session's connection to the goroutine that serves it without
    /// waiting (an unbuffered channel, a non-blocking send): a join that comes before that
    /// goroutine is ready (a busy relay, or the caller quick) is refused with "2 already
    /// connected", and the session's key is spent. The caller then asks for a new session,
    /// at most this many times in all per relay.
    package static let sessionAttempts = 3

    /// The refusal of that race, as `joinSession` throws it.
    package static func sessionNotReady(_ relay: RelayEndpoint) -> NetError {
        .unreachable(address: relay.description, reason: "the relay was not ready for the session (2 already connected)")
    }

    /// Asks `relay` for a session with the member `peer`; returns the invitation (checked:
    /// it names `peer`, and it is the client side's).
    package static func requestSession(with peer: CertificateID, at relay: RelayEndpoint, identity: TLSIdentity,
                                      timeout: Duration) throws(NetError) -> RelayInvitation {
        let stream = try connect(relay, identity: identity, timeout: timeout)
        defer { stream.close() }
        try stream.write(RelayMessage.connectRequest(id: peer.hash).encode())
        let deadline = ContinuousClock.now + timeout
        while true {
            switch try RelayMessage.read(from: stream, deadline: deadline) {
            case .ping: try stream.write(RelayMessage.pong.encode())
            case .pong: continue
            case let .sessionInvitation(invitation):
                return try checked(invitation, for: peer, from: relay)
            case let .response(code, message):
                throw .unreachable(address: relay.description, reason: "the relay answered \(code) (\(message.prefix(80))): \(peer) is not there")
            case .relayFull: throw .unreachable(address: relay.description, reason: "the relay is full")
            default: throw .protocolViolation("relay \(relay.host) answered a connect request with something else")
            }
        }
    }

    /// The invitation a relay answered our connect request with, if it is one for `peer`
    /// (a relay that invites us to a session with another device is refused).
    package static func checked(_ invitation: RelayInvitation, for peer: CertificateID, from relay: RelayEndpoint) throws(NetError) -> RelayInvitation {
        guard invitation.peer == peer else {
            throw .protocolViolation("relay \(relay.host) invited us to a session with \(invitation.peer.map(\.description) ?? "nobody"), not \(peer)")
        }
        guard !invitation.serverSocket, invitation.key.count == 32 else {
            throw .protocolViolation("relay \(relay.host) sent a malformed session invitation")
        }
        return invitation
    }

    /// Opens the session an invitation names: a plain TCP connection to the relay whose
    /// bytes, once the relay says so, are the other side's.
    package static func joinSession(_ invitation: RelayInvitation, relay: RelayEndpoint, timeout: Duration) throws(NetError) -> TCPConnection {
        let host = sessionHost(invitation, relay: relay)
        let port = invitation.port == 0 ? relay.port : invitation.port
        let connection = try TCPConnection.connect(host: host, port: port, timeout: timeout)
        do {
            try connection.write(RelayMessage.joinSessionRequest(key: invitation.key).encode())
            try expectSuccess(from: connection, deadline: .now + timeout, doing: "joining a session")
        } catch {
            connection.close()
            if case let .unreachable(_, reason) = error, reason.hasSuffix("joining a session: 2 already connected") {
                throw sessionNotReady(relay)
            }
            throw error
        }
        return connection
    }

    /// The invitation's address, or the relay's own host when it is empty or unspecified.
    /// Unspecified includes the IPv4-mapped 0.0.0.0 (`::ffff:0.0.0.0`): a `strelaysrv` started
    /// with `-listen 0.0.0.0:PORT` puts its listen address, in Go's 16-byte form, in every
    /// invitation. Taken as an address, it would send us to our own machine.
    static func sessionHost(_ invitation: RelayInvitation, relay: RelayEndpoint) -> String {
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
        switch invitation.address.count {
        case 4 where invitation.address != [0, 0, 0, 0]:
            return invitation.address.map(String.init).joined(separator: ".")
        case 16 where invitation.address.contains(where: { $0 != 0 }):
            if Array(invitation.address[0..<12]) == mapped {
                let ipv4 = invitation.address[12...]
                return ipv4.allSatisfy { $0 == 0 } ? relay.host : ipv4.map(String.init).joined(separator: ".")
            }
            return stride(from: 0, to: 16, by: 2).map {
                String(UInt16(invitation.address[$0]) << 8 | UInt16(invitation.address[$0 + 1]), radix: 16)
            }.joined(separator: ":")
        default:
            return relay.host
        }
    }

    static func connect(_ relay: RelayEndpoint, identity: TLSIdentity, timeout: Duration) throws(NetError) -> TLSStream {
        let connection = try TCPConnection.connect(host: relay.host, port: relay.port, timeout: timeout)
        return try TLSStream(over: connection, identity: identity, expected: relay.id, alpn: alpn, deadline: .now + timeout)
    }

    static func expectSuccess(from stream: any ByteStream, deadline: ContinuousClock.Instant, doing what: String) throws(NetError) {
        while true {
            switch try RelayMessage.read(from: stream, deadline: deadline) {
            case .ping: try stream.write(RelayMessage.pong.encode())
            case .pong: continue
            case .response(0, _): return
            case let .response(code, message):
                throw .unreachable(address: stream.remoteDescription, reason: "the relay refused \(what): \(code) \(message.prefix(80))")
            case .relayFull: throw .unreachable(address: stream.remoteDescription, reason: "the relay is full")
            default: throw .protocolViolation("\(stream.remoteDescription) answered \(what) with something else")
            }
        }
    }
}

/// Our membership of a relay: its protocol connection, on which invitations arrive.
package final class RelayMembership: Sendable {
    let stream: TLSStream
    package let relay: RelayEndpoint

    init(stream: TLSStream, relay: RelayEndpoint) {
        self.stream = stream
        self.relay = relay
    }

    /// Blocks until the relay invites us to a session (answering its pings meanwhile).
    /// Throws when the relay closes, breaks the protocol, or says nothing for `silence`
    /// (it pings every minute by default).
    package func nextInvitation(silence: Duration) throws(NetError) -> RelayInvitation {
        while true {
            switch try RelayMessage.read(from: stream, deadline: .now + silence) {
            case .ping: try stream.write(RelayMessage.pong.encode())
            case .pong: continue
            case let .sessionInvitation(invitation):
                guard invitation.serverSocket, invitation.peer != nil, invitation.key.count == 32 else {
                    throw .protocolViolation("relay \(relay.host) sent a malformed session invitation")
                }
                return invitation
            case .relayFull: throw .unreachable(address: relay.description, reason: "the relay is full")
            default: throw .protocolViolation("relay \(relay.host) sent an unexpected message to a member")
            }
        }
    }

    package func close() { stream.close() }
}
