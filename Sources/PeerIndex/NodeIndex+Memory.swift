extension NodeIndex {
    /// Hands back the memory of the connection's page cache (see `Database.releaseMemory`);
    /// the next reads fill it again from the file (the kernel's page cache, most often).
    package func releaseMemory() {
        try? read { db in db.releaseMemory() }
    }

    /// Bytes the connection's page cache holds now.
    package func pageCacheBytes() throws(IndexError) -> Int {
        try read { db in db.pageCacheBytes }
    }
}
