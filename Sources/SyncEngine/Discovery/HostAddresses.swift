internal import PeerNet
internal import Synchronization

/// This host's global IPv6 addresses as the announce loop (ConnectionService+GlobalDiscovery)
/// asks for them every half second: read on the asking thread, never the node's queue, and
/// only when the kernel said an address changed (`AddressChanges`), or at most every
/// `rereadInterval` when it cannot say. The first ask reads.
final class HostAddresses: Sendable {
    /// How often the addresses are read when no netlink socket tells of changes.
    static let rereadInterval: Duration = .seconds(5)

    private let changes = AddressChanges()
    private let cache = Mutex<(addresses: [IPv6Address], read: ContinuousClock.Instant?)>(([], nil))

    /// The global IPv6 addresses (`GlobalIPv6.ofThisHost`), as last read.
    func globalIPv6() -> [IPv6Address] {
        let (cached, read) = cache.withLock { ($0.addresses, $0.read) }
        // Notices are taken before the read: one arriving during it is seen next time.
        let due = read.map { changes?.changed() ?? (ContinuousClock.now - $0 >= Self.rereadInterval) } ?? true
        guard due else { return cached }
        if read == nil { _ = changes?.changed() }
        let addresses = GlobalIPv6.ofThisHost()
        cache.withLock { $0 = (addresses, .now) }
        return addresses
    }
}
