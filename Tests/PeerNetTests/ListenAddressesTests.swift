import Foundation
import PeerNet
import Testing

/// What `pair --code` tells the other node: a concrete listen address as it is; for a wildcard
/// the interface addresses with the port, never the wildcard, loopback only when nothing else.
struct ListenAddressesTests {
    @Test(arguments: [("10.1.2.3", "10.1.2.3:22000"), ("fd99::1", "[fd99::1]:22000"), ("alice.lan", "alice.lan:22000")])
    func aConcreteHostIsItsOwnAnswer(_ host: String, _ expected: String) {
        #expect(ListenAddresses.dialable(host: host, port: 22000) == [expected])
    }

    @Test(arguments: ["", "0.0.0.0", "::"])
    func aWildcardBecomesInterfaceAddresses(_ host: String) throws {
        let addresses = ListenAddresses.dialable(host: host, port: 22000)
        #expect(!addresses.isEmpty && addresses.count <= ListenAddresses.limit, "\(addresses)")
        for address in addresses {
            let parsed = try HostPort(parsing: address)
            #expect(parsed.port == 22000)
            #expect(!ListenAddresses.isWildcard(parsed.host), "\(address)")
            if host == "0.0.0.0" { #expect(!parsed.host.contains(":"), "IPv4 only for 0.0.0.0: \(address)") }
        }
        // Loopback only when there is nothing else (this machine has another interface or not).
        if addresses.contains(where: { $0.hasPrefix("127.") || $0.hasPrefix("[::1]") }) {
            #expect(addresses.allSatisfy { $0.hasPrefix("127.") || $0.hasPrefix("[::1]") || $0.hasPrefix("[fe80") }, "\(addresses)")
        }
    }
}
