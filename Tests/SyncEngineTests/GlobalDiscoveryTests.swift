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

    /// A lying server's answers (the HTTP exchange runs over plain TCP here, against a
    /// listener that plays the server): each is refused with a clear error, never held whole.
    @Test(arguments: [
        ("a 1 GiB body announced", "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n{"),
        ("endless headers", "HTTP/1.1 200 OK\r\n" + String(repeating: "X-Pad: 0123456789abcdef\r\n", count: 1_000)),
        ("an endless chunked body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "4000\r\n" + String(repeating: "a", count: 16_384) + "\r\n", count: 8)),
        ("not HTTP", "SSH-2.0-OpenSSH_9.2\r\n\r\n"),
        ("silence", ""),
    ])
    func aLyingServersAnswerIsRefused(_ lie: (String, String)) throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        Thread {
            guard let connection = try? listener.accept() else { return }
            _ = try? connection.read(maxCount: 4_096, deadline: .now + .seconds(5))
            if !lie.1.isEmpty { try? connection.write(Array(lie.1.utf8)) }
            _ = try? connection.read(maxCount: 64, deadline: .now + .seconds(5))
            connection.close()
        }.start()
        let connection = try TCPConnection.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(5))
        defer { connection.close() }
        // Refused as soon as a bound is crossed (a protocol violation), not after waiting for
        // the rest; only silence ends by the deadline.
        #expect("\(lie.0)") {
            _ = try HTTPSExchange.perform("GET", path: "/?device=X", host: "127.0.0.1", over: connection, deadline: .now + .seconds(2))
        } throws: { error in
            switch error as? NetError {
            case .protocolViolation?: lie.1 != ""
            case .timedOut?: lie.1 == ""
            default: false
            }
        }
    }

    @Test func aLookupAnswerWithTooManyOrMalformedAddressesIsRefused() throws {
        func answer(_ addresses: [String]) throws -> [UInt8] {
            Array(try JSONSerialization.data(withJSONObject: ["seen": "2026-01-01T00:00:00Z", "addresses": addresses]))
        }
        let thousand = (0..<1_000).map { "tcp://192.0.2.\($0 % 250):\(1_000 + $0)" }
        #expect(throws: GlobalDiscoveryClient.Failure.badAnswer("1000 addresses, more than the 32 accepted")) {
            try GlobalDiscoveryClient.addresses(fromAnswer: answer(thousand))
        }
        #expect(throws: GlobalDiscoveryClient.Failure.badAnswer("not a JSON object")) {
            try GlobalDiscoveryClient.addresses(fromAnswer: Array("{\"addresses\": [".utf8))
        }
        #expect(throws: GlobalDiscoveryClient.Failure.badAnswer("no \"addresses\" list")) {
            try GlobalDiscoveryClient.addresses(fromAnswer: Array("{\"addresses\": 7}".utf8))
        }
        // Only what can be dialled is kept: other schemes, no port, absurd lengths are dropped.
        let mixed = ["tcp://192.0.2.1:4000", "quic://192.0.2.1:4000", "tcp://192.0.2.2", "http://example.org:80/",
                     "tcp://" + String(repeating: "a", count: 600) + ":1", "relay://192.0.2.9:22067/?id=X"]
        #expect(try GlobalDiscoveryClient.addresses(fromAnswer: answer(mixed)) == ["tcp://192.0.2.1:4000", "relay://192.0.2.9:22067/?id=X"])
    }

    /// `daemon --discovery-server`: between announces (the server asks for the next in
    /// minutes) the loop sleeps in short steps, reading `stopped` under the connections'
    /// lock (it hopped to the node's queue each step); stopping the node still ends it.
    @Test func stoppingTheNodeEndsItsAnnounceLoop() throws {
        let server = try GlobalServer.discovery()
        defer { server.stop() }
        let pin = try CertificateID(certificate: server.certificate())
        let alice = try ConnectionServiceTests.Peer("alice") { $0.discoveryServers = ["https://127.0.0.1:\(server.port)/?id=\(pin)"] }
        defer { alice.service.stop() }
        alice.service.startAnnouncing()
        try TransferPair.eventually("the announce loop runs") { Self.announceThreads() == 1 }
        Thread.sleep(forTimeInterval: 1)  // it announced (or failed to): it sleeps until the next one, 10 s away at least (`delayRange`)
        #expect(Self.announceThreads() == 1)
        alice.service.stop()
        try TransferPair.eventually("the announce loop ends well before its next announce", timeout: 5) { Self.announceThreads() == 0 }
    }

    /// Threads of this process running an announce loop (named "syncpeer-announce",
    /// cut to 15 bytes by the kernel).
    static func announceThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.hasPrefix("syncpeer-announ") == true
        }.count
    }
}
