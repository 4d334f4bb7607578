import Foundation
import Testing

extension NatScenarioTests {
    /// bob joined no relay of his own (discovery server only) and pairs by alice's certificate
    /// ID: the discovery server holds alice's router address, which answers nothing, and the
    /// relay she joined, which she announced as soon as she had joined it; bob reaches her
    /// through that relay. (Before: her first announce went out before the join completed and
    /// the next one half an hour later, and `pair` used only relays configured on bob's side.)
    @Test func aHomeWithNoRelayOfItsOwnPairsThroughTheRelayThePeerAnnounced() throws {
        let world = try NatWorld()
        defer { world.stop() }
        let alice = try world.daemon("alice", home: 0)
        let bob = try world.daemon("bob", home: 1, joinsRelay: false)
        // What the server holds for alice: her router's address (it saw her through it) and
        // the relay, once she has joined it.
        var announced: [String] = []
        try world.eventually("alice's relay announced", timeout: 20) {
            announced = try world.announced(alice)
            return announced.contains(world.relayURL)
        }
        #expect(announced.contains("tcp://\(NatTopology.routerAddress(0)):\(alice.port)"), "\(announced)")
        let paired = try world.env.pairByCertificateID(bob, with: alice).result
        #expect(paired.status == 0, "\(paired.stderr)")
        try bob.waitForState("connected", peer: "alice", timeout: 30)
        #expect(world.path(bob, "alice") == "relay \(NatTopology.internetAddress)")
        #expect(try RelayTests().peer(world.env, bob, named: "alice")?["paired"] as? Bool == true)
    }
}
