import Foundation
import PeerNet
import Testing

/// `AddressChanges` (a netlink socket made inside a test namespace): an address added there
/// is reported once, and nothing is reported while nothing changes, so the announce loop
/// re-reads the interfaces only after a change.
@Suite(.serialized, .enabled(if: Netns.available, "needs ip netns"))
struct AddressChangesTests {
    @Test func anAddressAddedInTheNamespaceIsReportedOnce() throws {
        let namespace = try TestNamespace.loopbackOnly()
        defer { namespace.remove() }
        let thread = try NetnsThread(namespace)
        defer { thread.finish() }
        let changes = try #require(try thread.run { AddressChanges() })
        #expect(!changes.changed())

        _ = try ip(["-n", namespace.name, "addr", "add", "2001:db8:5::1/128", "dev", "lo", "nodad"])
        var reported = false
        for _ in 0..<100 where !reported {
            reported = changes.changed()
            if !reported { Thread.sleep(forTimeInterval: 0.02) }
        }
        #expect(reported, "the added address was not reported")
        #expect(!changes.changed(), "reported again with nothing changed")

        _ = try ip(["-n", namespace.name, "addr", "del", "2001:db8:5::1/128", "dev", "lo"])
        reported = false
        for _ in 0..<100 where !reported {
            reported = changes.changed()
            if !reported { Thread.sleep(forTimeInterval: 0.02) }
        }
        #expect(reported, "the removed address was not reported")
    }
}
