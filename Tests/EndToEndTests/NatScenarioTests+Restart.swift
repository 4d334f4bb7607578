import Foundation
import Testing

extension NatScenarioTests {
    /// Both homes' daemons stop and start again: alice and bob, paired by certificate ID
    /// through the relay and never connected directly, have no address of each other, yet
    /// find each other again through the relay. (Before: a paired peer with no stored
    /// address was never redialled, at start or after its session ended.)
    @Test func homesPairedThroughTheRelayFindEachOtherAgainAfterBothRestart() throws {
        let world = try NatWorld()
        defer { world.stop() }
        var (alice, bob) = try world.relayedHomes()
        _ = alice.stop()
        _ = bob.stop()
        alice = try world.daemon("alice", home: 0, directory: alice.home)
        bob = try world.daemon("bob", home: 1, directory: bob.home)
        try world.eventually("alice and bob connected again through the relay", timeout: 45) {
            world.path(alice, "bob") == "relay \(NatTopology.internetAddress)" && world.path(bob, "alice") == "relay \(NatTopology.internetAddress)"
        }
    }
}
