import PeerCrypto
@testable import PeerNet
import Testing

/// Where a relay session is joined: the address a relay's invitation carries, unless it is
/// empty or unspecified in any of its forms, then the relay's own host (as Syncthing's
/// client does). A relay listening on all its addresses (`-listen 0.0.0.0:PORT`) sends the
/// IPv4-mapped 0.0.0.0, which is no address to dial (on Linux it reaches this machine).
struct RelaySessionHostTests {
    static let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]

    @Test(arguments: [
        ("empty", [], "relay.example"),
        ("0.0.0.0", [0, 0, 0, 0], "relay.example"),
        ("::", [UInt8](repeating: 0, count: 16), "relay.example"),
        ("::ffff:0.0.0.0 (strelaysrv -listen 0.0.0.0:PORT)", mapped + [0, 0, 0, 0], "relay.example"),
        ("::ffff:203.0.113.1", mapped + [203, 0, 113, 1], "203.0.113.1"),
        ("203.0.113.1", [203, 0, 113, 1], "203.0.113.1"),
        ("2001:db8::1", [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1], "2001:db8:0:0:0:0:0:1"),
    ] as [(String, [UInt8], String)])
    func theSessionIsJoinedAtTheInvitationsAddressOrTheRelays(_ example: (String, [UInt8], String)) throws {
        let relay = RelayEndpoint(host: "relay.example", port: 22067, id: try #require(CertificateID(hash: [UInt8](repeating: 3, count: 32))))
        let invitation = RelayInvitation(from: [UInt8](repeating: 1, count: 32), key: [UInt8](repeating: 2, count: 32),
                                         address: example.1, port: 22067, serverSocket: true)
        #expect(RelayClient.sessionHost(invitation, relay: relay) == example.2, "\(example.0)")
    }
}
