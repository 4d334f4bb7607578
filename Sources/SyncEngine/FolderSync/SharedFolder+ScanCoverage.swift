internal import PeerFiles
internal import Synchronization

/// Watcher batches a completed scan already took in are not scanned again (`ScanCoverage`).
extension SharedFolder {
    /// A scan that started at `startedNs` completed (io).
    func noteScanCompleted(paths: [String]?, startedNs: Int64) {
        let hook = state.withLock { $0.coverage.afterWalk }
        hook?()
        state.withLock { $0.coverage.completed(paths: paths, startedNs: startedNs) }
    }

    /// The paths of a watcher batch that no completed scan took in after its newest event (io).
    func notScannedSince(_ paths: [String], newestEventNs: Int64) -> [String] {
        state.withLock { $0.coverage.uncovered(paths, newestEventNs: newestEventNs) }
    }

    /// Tests: the folder's `ScanCoverage` counters.
    var scanCoverage: ScanCoverage { state.withLock { $0.coverage } }
}
