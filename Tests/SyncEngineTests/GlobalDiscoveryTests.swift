import Foundation
import PeerCrypto
import PeerNet
@testable import SyncEngine
import TestKit
import Testing

/// Global discovery against a real Syncthing `stdiscosrv` on 127.0.0.1 (and a lying server
/// played by a small TLS server in Python): what a user of `daemon --discovery-server` relies
/// on — a device found by its certificate ID, the server pinned, a hostile answer refused.
@Suite(.serialized, .enabled(if: GlobalServer.available, "needs syncthing-discosrv and syncthing-relaysrv (scripts/install-deps.sh)"))
struct GlobalDiscoveryTests {
    static func client(_ server: GlobalServer, id: CertificateID? = nil, key: KeyPair = .generate()) throws -> GlobalDiscoveryClient {
        let pin = try id ?? CertificateID(certificate: server.certificate())
        let url = "https://127.0.0.1:\(server.port)/?id=\(pin)"
        return GlobalDiscoveryClient(server: try DiscoveryServer(parsing: url), identity: try TLSIdentity(keyPair: key))
    }

    @Test func ourCertificateIDIsSyncthingsDeviceID() throws {
        let server = try GlobalServer.discovery()
        defer { server.stop() }
        // The server prints its own ID (Syncthing's code); ours, of the same certificate, must match.
        #expect(CertificateID(certificate: try server.certificate()).description == server.printedID)
        #expect(try CertificateID(parsing: server.printedID.lowercased()).description == server.printedID)
        // syncpeer's own device IDs use another check character: never mistaken for one.
        #expect(throws: CryptoError.self) { try DeviceID(parsing: server.printedID) }
    }

    @Test func aDeviceAnnouncedIsFoundByItsCertificateID() throws {
        let server = try GlobalServer.discovery()
        defer { server.stop() }
        let alice = KeyPair.generate()
        let announcer = try Self.client(server, key: alice)
        let delay = try announcer.announce(["tcp://192.0.2.10:4123", "relay://192.0.2.99:22067/?id=AZ5F4ZT-2WE5JKY-CAJLPKS-D35IT2F-UIL2GXA-F244TRW-IM6DT37-QK756Q7"])
        #expect(GlobalDiscoveryClient.delayRange.contains(delay))
        let aliceID = try TLSIdentity(keyPair: alice).id
        let found = try Self.client(server).lookup(aliceID)
        #expect(Set(found) == ["tcp://192.0.2.10:4123", "relay://192.0.2.99:22067/?id=AZ5F4ZT-2WE5JKY-CAJLPKS-D35IT2F-UIL2GXA-F244TRW-IM6DT37-QK756Q7"])
        // A device nobody announced is not found, and the server's delay is kept.
        #expect(throws: GlobalDiscoveryClient.Failure.self) { try Self.client(server).lookup(TLSIdentity(keyPair: .generate()).id) }
    }

    @Test func aServerWithAnotherCertificateIsRefused() throws {
        let server = try GlobalServer.discovery()
        defer { server.stop() }
        let impostorPin = try TLSIdentity(keyPair: .generate()).id
        let client = try Self.client(server, id: impostorPin)
        do throws(GlobalDiscoveryClient.Failure) {
            _ = try client.announce(["tcp://192.0.2.10:4123"])
            Issue.record("an announce to a server with another certificate succeeded")
        } catch {
            guard case let .network(.handshakeFailed(why)) = error else { Issue.record("unexpected \(error)"); return }
            #expect(why.contains("not the server"))
        }
    }
}
