internal import PeerIndex

extension Daemon {
    /// Hands back memory that caches keep after large work: the index's page cache, which
    /// stays full (up to 32 MiB) in an idle daemon after a large pull or scan.
    package func releaseCaches() {
        node.index.releaseMemory()
    }
}
