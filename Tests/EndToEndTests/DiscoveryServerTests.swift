import Foundation
import TestKit
import Testing

/// `daemon --discovery-server`: a paired peer that moved (came back on another port) is found
/// again through a real Syncthing `stdiscosrv`. Two test namespaces joined by a veth pair
/// (10.99.0.1, 10.99.0.2): the server drops loopback addresses, so it cannot run on 127.0.0.1.
@Suite(.serialized, .enabled(if: GlobalServer.available && TestNetns.available, "needs syncthing-discosrv and ip netns"))
struct DiscoveryServerTests {
    @Test func aPeerThatMovedIsFoundAgainThroughTheDiscoveryServer() throws {
        let (first, second, _, _) = try TestNamespace.vethPair()
        defer { first.remove(); second.remove() }
        let server = try GlobalServer.discovery(namespace: first.name, host: "10.99.0.1")
        defer { server.stop() }
        let url = "https://10.99.0.1:\(server.port)/?id=\(server.printedID)"
        let environment = ["SYNCPEER_LOOKUP_MS": "500"]
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let arguments = ["--auto-accept", "--discovery-server", url]
        var alice = try DaemonProcess(env, name: "alice", arguments: arguments, environment: environment,
                                      namespace: first.name, listen: "10.99.0.1:0")
        var bob = try DaemonProcess(env, name: "bob", arguments: arguments, environment: environment,
                                    namespace: second.name, listen: "10.99.0.2:0")
        defer { _ = alice.stop(); _ = bob.stop() }
        _ = try env.pair(bob, alice, autoAccepted: true)
        try bob.waitForState("connected", peer: "alice")
        try RelayTests().eventually("bob pinned alice's certificate ID") {
            try RelayTests().peer(env, bob, named: "alice")?["certificateID"] != nil
        }

        // Both come back on other ports: the addresses each stored lead nowhere now, and
        // local discovery is off; only the discovery server knows where they went.
        let oldPorts = (alice.port, bob.port)
        _ = alice.stop()
        _ = bob.stop()
        alice = try DaemonProcess(env, name: "alice", home: alice.home, arguments: arguments, environment: environment,
                                  namespace: first.name, listen: "10.99.0.1:0")
        bob = try DaemonProcess(env, name: "bob", home: bob.home, arguments: arguments, environment: environment,
                                namespace: second.name, listen: "10.99.0.2:0")
        #expect(alice.port != oldPorts.0 && bob.port != oldPorts.1)
        try bob.waitForState("connected", peer: "alice", timeout: 40)
        let path = try #require(try RelayTests().peer(env, bob, named: "alice")?["path"] as? String)
        #expect(path.hasPrefix("direct 10.99.0.1:"), "\(path)")
    }
}
