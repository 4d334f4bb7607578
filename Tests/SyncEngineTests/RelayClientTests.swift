import Dispatch
import Foundation
import PeerCrypto
import PeerNet
import PeerWire
import Synchronization
import TestKit
import Testing

/// Syncthing's relay (a real `strelaysrv` on 127.0.0.1, `-pools=` so it stays private) as
/// the byte stream between two nodes that never dial each other: one joins the relay, the
/// other asks it for a session, and the Noise session runs end to end through it.
@Suite(.serialized, .enabled(if: GlobalServer.available, "needs syncthing-relaysrv (scripts/install-deps.sh)"))
struct RelayClientTests {
    static func endpoint(_ server: GlobalServer) throws -> RelayEndpoint {
        RelayEndpoint(host: "127.0.0.1", port: server.port, id: CertificateID(certificate: try server.certificate()))
    }

    @Test func aNoiseSessionRunsThroughTheRelayBetweenAMemberAndACaller() throws {
        let relay = try GlobalServer.relay()
        defer { relay.stop() }
        let endpoint = try Self.endpoint(relay)
        #expect(endpoint.id.description == relay.printedID)
        let alice = KeyPair.generate(), bob = KeyPair.generate()
        let aliceTLS = try TLSIdentity(keyPair: alice), bobTLS = try TLSIdentity(keyPair: bob)

        // Alice joins the relay and waits for an invitation, then answers the handshake in it.
        let membership = try RelayClient.join(endpoint, identity: aliceTLS, timeout: .seconds(10))
        defer { membership.close() }
        let aliceSide = Mutex<Result<(SecureChannel, RelayInvitation), NetError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        // strelaysrv can refuse the member's join of a session when the caller's join reached it
        // first (its hand-over is a non-blocking send), leaving the caller's handshake to time
        // out; the daemon then asks for a session again (ConnectionService.initiateThroughRelays),
        // and so does this test: each side tries a second session.
        Thread {
            for attempt in 1...2 {
                do throws(NetError) {
                    let invitation = try membership.nextInvitation(silence: .seconds(20))
                    let stream = try RelayClient.joinSession(invitation, relay: endpoint, timeout: .seconds(10))
                    let channel = try SecureChannel.respond(over: stream, staticKey: alice, hello: Hello(displayName: "alice", softwareVersion: "test"))
                    aliceSide.withLock { $0 = .success((channel, invitation)) }
                    break
                } catch {
                    aliceSide.withLock { $0 = .failure(error) }
                    if attempt == 2 { break }
                }
            }
            done.signal()
        }.start()

        // Bob knows only Alice's certificate ID and the relay.
        func session() throws -> SecureChannel {
            let invitation = try RelayClient.requestSession(with: aliceTLS.id, at: endpoint, identity: bobTLS, timeout: .seconds(10))
            let stream = try RelayClient.joinSession(invitation, relay: endpoint, timeout: .seconds(10))
            return try SecureChannel.initiate(over: stream, staticKey: bob, hello: Hello(displayName: "bob", softwareVersion: "test"))
        }
        let bobChannel: SecureChannel
        do { bobChannel = try session() } catch NetError.timedOut { bobChannel = try session() }
        defer { bobChannel.close() }
        #expect(done.wait(timeout: .now() + 20) == .success)
        let (aliceChannel, aliceInvitation) = try #require(try aliceSide.withLock { try $0?.get() })
        defer { aliceChannel.close() }
        // Each end is who it should be: the relay named the caller, and Noise proves both keys.
        #expect(aliceInvitation.peer == bobTLS.id)
        #expect(bobChannel.remoteDeviceID == DeviceID(publicKey: alice.publicKey))
        #expect(aliceChannel.remoteDeviceID == DeviceID(publicKey: bob.publicKey))
        try bobChannel.send(.message(id: 1, body: Array("through the relay".utf8)))
        let frame = try aliceChannel.receive(deadline: .now + .seconds(10))
        #expect(frame == .message(id: 1, body: Array("through the relay".utf8)))
    }

    @Test func aRelayAsksForAMissingMemberOrWithAnotherCertificateIsRefused() throws {
        let relay = try GlobalServer.relay()
        defer { relay.stop() }
        let endpoint = try Self.endpoint(relay)
        let bobTLS = try TLSIdentity(keyPair: .generate())
        let nobody = try TLSIdentity(keyPair: .generate()).id
        #expect {
            _ = try RelayClient.requestSession(with: nobody, at: endpoint, identity: bobTLS, timeout: .seconds(10))
        } throws: { error in
            guard case let NetError.unreachable(_, reason) = error else { return false }
            return reason.contains("not there")
        }
        let impostor = RelayEndpoint(host: "127.0.0.1", port: relay.port, id: nobody)
        #expect {
            _ = try RelayClient.join(impostor, identity: bobTLS, timeout: .seconds(10))
        } throws: { error in
            guard case NetError.handshakeFailed = error else { return false }
            return true
        }
    }

    /// A relay that answers our connect request with an invitation to another device's
    /// session (or a malformed one) is refused before we join anything.
    @Test func anInvitationForAnotherDeviceIsRefused() throws {
        let wanted = try TLSIdentity(keyPair: .generate()).id
        let other = try TLSIdentity(keyPair: .generate()).id
        let relay = RelayEndpoint(host: "192.0.2.1", port: 22067, id: other)
        let key = [UInt8](repeating: 7, count: 32)
        func invitation(from: [UInt8], server: Bool = false, key: [UInt8] = key) -> RelayInvitation {
            RelayInvitation(from: from, key: key, address: [], port: 22067, serverSocket: server)
        }
        #expect(try RelayClient.checked(invitation(from: wanted.hash), for: wanted, from: relay).key == key)
        for lie in [invitation(from: other.hash), invitation(from: []), invitation(from: wanted.hash, server: true),
                    invitation(from: wanted.hash, key: [1])] {
            #expect(throws: NetError.self) { try RelayClient.checked(lie, for: wanted, from: relay) }
        }
        // The wire form is XDR as Syncthing writes it: a 12-byte header, three length-prefixed
        // 32-byte fields, the port and the bool in 4 bytes each.
        let encoded = RelayMessage.sessionInvitation(invitation(from: wanted.hash)).encode()
        #expect(encoded.count == 12 + 36 + 36 + 4 + 8)
    }

    /// A relay that lies in session mode (plain TCP, so a listener here plays it): garbage
    /// after the join, a huge length, "full", or silence each end with a clear error, in time.
    @Test(arguments: [
        ("garbage", Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8)),
        ("huge length", RelayHeader.bytes(type: 4, length: 1 << 30)),
        ("full", RelayMessage.relayFull.encode()),
        ("silence", []),
    ])
    func aLyingRelayIsRefused(_ lie: (String, [UInt8])) throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        let port = listener.port
        Thread {
            guard let connection = try? listener.accept() else { return }
            _ = try? connection.read(maxCount: 64, deadline: .now + .seconds(5))
            if !lie.1.isEmpty { try? connection.write(lie.1) }
            _ = try? connection.read(maxCount: 64, deadline: .now + .seconds(5))
            connection.close()
        }.start()
        let endpoint = RelayEndpoint(host: "127.0.0.1", port: port, id: try TLSIdentity(keyPair: .generate()).id)
        let invitation = RelayInvitation(from: [UInt8](repeating: 1, count: 32), key: [UInt8](repeating: 2, count: 32),
                                         address: [], port: port, serverSocket: false)
        // The 2 s deadline ends the silent case (timed out) instead of a hang.
        #expect(throws: NetError.self, "\(lie.0)") {
            _ = try RelayClient.joinSession(invitation, relay: endpoint, timeout: .seconds(2))
        }
    }
}

enum RelayHeader {
    static func bytes(type: UInt32, length: UInt32) -> [UInt8] {
        var bytes: [UInt8] = [0x9E, 0x79, 0xBC, 0x40]
        for value in [type, length] {
            for shift in [UInt32(24), 16, 8, 0] { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
        }
        return bytes
    }
}
