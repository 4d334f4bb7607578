internal import PeerFiles

/// Which scans a folder completed lately and when each started: the paths of a watcher batch
/// that such a scan covers need no scan of their own (`syncpeer rescan` scans a new tree,
/// then the watcher's batch for the same writes would read it all again: 5 % of the
/// sender's CPU in D).
///
/// A scan covers a path of a batch when it started after the batch's newest event was read
/// (`WatchBatch.newestEventNs`, the same clock) and it took in that path: it was a whole
/// scan, or one of some paths at or above it. A change made during or after a scan is read
/// after that scan started, so its batch is scanned as before. Pure logic; `SharedFolder`
/// keeps one in its state (io).
struct ScanCoverage {
    /// When the last whole scan that completed started.
    private(set) var wholeStartedNs = Int64.min
    /// The last scans of a few paths that completed, oldest first.
    private(set) var parts: [(startedNs: Int64, paths: [String])] = []
    /// Scans of some paths that completed, and paths of batches left out (for tests).
    private(set) var partScans = 0
    private(set) var coveredPaths = 0
    /// Tests: runs once a scan has walked and before it is noted (a change it cannot have seen).
    var afterWalk: (@Sendable () -> Void)?

    /// Scans of some paths remembered, and paths per such scan (those of a larger batch are
    /// not: a batch's scan rarely stands for a later batch).
    static let maxParts = 8
    static let maxPartPaths = 16

    /// A scan that started at `startedNs` (`WatchBatch.now()`) completed: of the whole
    /// folder (`paths` nil) or of `paths` and below.
    mutating func completed(paths: [String]?, startedNs: Int64) {
        guard let paths else {
            wholeStartedNs = max(wholeStartedNs, startedNs)
            parts.removeAll { $0.startedNs <= startedNs }
            return
        }
        partScans += 1
        guard paths.count <= Self.maxPartPaths else { return }
        parts.append((startedNs, paths))
        if parts.count > Self.maxParts { parts.removeFirst(parts.count - Self.maxParts) }
    }

    /// `paths` of a batch whose newest event was read at `newestEventNs`, less those a
    /// completed scan that started later took in.
    mutating func uncovered(_ paths: [String], newestEventNs: Int64) -> [String] {
        if wholeStartedNs > newestEventNs {
            coveredPaths += paths.count
            return []
        }
        let later = parts.filter { $0.startedNs > newestEventNs }.flatMap(\.paths)
        guard !later.isEmpty else { return paths }
        let left = paths.filter { path in !later.contains { Self.isAtOrBelow(path, $0) } }
        coveredPaths += paths.count - left.count
        return left
    }

    /// `path` is `top` or below it (bytes compared: two spellings of a name are two names).
    static func isAtOrBelow(_ path: String, _ top: String) -> Bool {
        guard path.utf8.starts(with: top.utf8) else { return false }
        return path.utf8.count == top.utf8.count || path.utf8.dropFirst(top.utf8.count).first == UInt8(ascii: "/")
    }
}
