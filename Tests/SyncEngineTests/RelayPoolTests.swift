import Foundation
import PeerCrypto
import PeerNet
@testable import SyncEngine
import Synchronization
import TestKit
import Testing

/// A relay pool (`--relay-pool`, `--global`): a local HTTPS server (python3's ssl) with a
/// certificate from a CA made for these tests, which OpenSSL trusts through `SSL_CERT_FILE`
/// as a user's client would through the system's bundle. Never the real pool.
@Suite(.serialized)
struct RelayPoolTests {
    /// One CA for the suite: `SSL_CERT_FILE` is process-wide, read by OpenSSL at each connection.
    static let ca: TestCA = {
        let ca = try! TestCA()
        setenv("SSL_CERT_FILE", ca.caFile.path, 1)
        return ca
    }()

    static func relayURL(_ id: CertificateID, port: Int = 22067) -> String {
        "relay://127.0.0.1:\(port)/?id=\(id)&pingInterval=1m0s&networkTimeout=2m0s&statusAddr=:22070&providedBy=test"
    }

    static func answer(_ urls: [Any]) -> [UInt8] {
        Array(try! JSONSerialization.data(withJSONObject: ["relays": urls.map { ["url": $0, "stats": ["numActiveSessions": 1]] }]))
    }

    func fetch(_ body: [UInt8], names: [String] = ["IP:127.0.0.1", "DNS:localhost"], ca: TestCA = Self.ca) throws -> [RelayEndpoint] {
        _ = Self.ca
        let server = try TLSTestServer.pool(serving: body, ca: ca, names: names)
        defer { server.stop() }
        return try RelayPool(parsing: "https://127.0.0.1:\(server.port)/endpoint").fetch(timeout: .seconds(10))
    }

    func refusal(_ body: [UInt8], names: [String] = ["IP:127.0.0.1", "DNS:localhost"], ca: TestCA = Self.ca) throws -> String {
        do {
            let relays = try fetch(body, names: names, ca: ca)
            Issue.record("the pool's answer was accepted: \(relays)")
            return ""
        } catch let error as EngineError {
            return error.description
        }
    }

    @Test func thePoolsRelaysAreReadOverVerifiedHTTPSAndBadEntriesDropped() throws {
        let a = try TLSIdentity(keyPair: .generate()).id, b = try TLSIdentity(keyPair: .generate()).id
        let tooLong = Self.relayURL(b) + "&providedBy=" + String(repeating: "x", count: 1_100)
        let relays = try fetch(Self.answer([Self.relayURL(a), Self.relayURL(a), "tcp://127.0.0.1:1", 42, tooLong,
                                            "relay://127.0.0.1:22067/", Self.relayURL(b, port: 22068)]))
        // The duplicate, the non-relay, the number, the 1 KiB+ URL and the one without an ID are dropped.
        #expect(relays == [RelayEndpoint(host: "127.0.0.1", port: 22067, id: a), RelayEndpoint(host: "127.0.0.1", port: 22068, id: b)])
    }

    @Test func aHugeAnswerTenThousandRelaysOrGarbageAreRefusedClearly() throws {
        let id = try TLSIdentity(keyPair: .generate()).id
        let huge = Array(repeating: UInt8(ascii: " "), count: RelayPool.maxBody + 1) + Self.answer([Self.relayURL(id)])
        #expect(try refusal(huge).contains("more than the \(RelayPool.maxBody) accepted"))
        let many = Array(try JSONSerialization.data(withJSONObject: ["relays": (0..<10_000).map {
            ["url": "relay://127.0.0.1:\(1_000 + $0)/?id=\(id)"]
        }]))
        #expect(many.count < RelayPool.maxBody, "the count is what refuses it, not the size")
        #expect(try refusal(many).contains("listed 10000 relays, more than the \(RelayPool.maxRelays) accepted"))
        #expect(try refusal(Array("<html>relays</html>".utf8)).contains("not a JSON object"))
        #expect(try refusal(Array(#"{"relays": "none"}"#.utf8)).contains(#"no "relays" list"#))
    }

    /// A certificate no trusted CA issued, or one issued for another name, is refused
    /// before a byte of the answer is read.
    @Test func aPoolWithTheWrongCertificateIsRefused() throws {
        let id = try TLSIdentity(keyPair: .generate()).id
        let otherCA = try TestCA()
        defer { otherCA.remove() }
        let unknownIssuer = try refusal(Self.answer([Self.relayURL(id)]), ca: otherCA)
        #expect(unknownIssuer.contains("the server's certificate was refused"), "\(unknownIssuer)")
        let otherName = try refusal(Self.answer([Self.relayURL(id)]), names: ["DNS:pool.example.invalid"])
        #expect(otherName.contains("the server's certificate was refused") && otherName.contains("mismatch"), "\(otherName)")
    }

    /// The fastest few of a sample are kept; relays that do not answer are not; a pool of
    /// 10,000 relays costs `probed` measurements, not 10,000.
    @Test func theFastestRelaysOfABoundedSampleAreChosen() throws {
        let ids = try (0..<10).map { _ in try TLSIdentity(keyPair: .generate()).id }
        let relays = ids.enumerated().map { RelayEndpoint(host: "192.0.2.\($0.offset + 1)", port: 22067, id: $0.element) }
        let chosen = RelayPool.choose(relays) { relay in
            let index = relays.firstIndex(of: relay)!
            return index == 0 ? nil : .milliseconds(60 * index)
        }
        #expect(chosen == Array(relays[1...3]))
        let measured = Atomic<Int>(0)
        let many = (0..<10_000).map { RelayEndpoint(host: "192.0.2.1", port: UInt16(1_000 + $0), id: ids[0]) }
        let some = RelayPool.choose(many) { _ in
            measured.add(1, ordering: .relaxed)
            return .milliseconds(5)
        }
        #expect(measured.load(ordering: .relaxed) == RelayPool.probed)
        #expect(some.count == RelayPool.joined)
    }

    @Test func poolURLsAreHTTPSAndBounded() throws {
        #expect(try RelayPool(parsing: RelayPool.publicDefault).host == "relays.syncthing.net")
        for bad in ["http://relays.syncthing.net/endpoint", "relays.syncthing.net", "https:///x",
                    "https://example.org/" + String(repeating: "a", count: 1_100)] {
            #expect(throws: EngineError.self, "\(bad.prefix(40))") { try RelayPool(parsing: bad) }
        }
    }
}
