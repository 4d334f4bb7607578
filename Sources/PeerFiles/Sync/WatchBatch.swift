internal import Glibc

/// One batch of changes `FolderWatcher` reports, with when its newest event was read.
///
/// A scan that started after `newestEventNs` (on the same clock, `WatchBatch.now()`) saw
/// the disk as it was after every event of the batch: the kernel queues an event once its
/// change is made, and the watcher reads it later still (and a directory's listing, which
/// reports what a new directory already held, notes each entry after it existed). Such a
/// scan can stand for the batch. When the batch was delivered says nothing of that: a
/// batch waits up to its aggregation delay after its newest event.
package struct WatchBatch: Sendable {
    package var changes: [WatchChange]
    /// `now()` when the newest event of the batch (of any kind, the node's own writes and
    /// ignored paths too) was read or listed.
    package var newestEventNs: Int64

    package init(changes: [WatchChange], newestEventNs: Int64) {
        self.changes = changes
        self.newestEventNs = newestEventNs
    }

    /// The watcher's clock: CLOCK_MONOTONIC in nanoseconds.
    package static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
