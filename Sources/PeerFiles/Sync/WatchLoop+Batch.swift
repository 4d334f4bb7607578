internal import Glibc
internal import Synchronization

// The batch being aggregated: when it is due, and delivering it.
extension WatchLoop {
    /// When the batch being aggregated is due.
    var dueNs: Int64 {
        let wait = !quickBatch ? delayNs : isSettled ? settleDelayNs : quickDelayNs
        return min(lastEventNs + wait, firstEventNs + maxDelayNs)
    }

    /// Nothing of the batch is still being written: every file written in it was closed,
    /// every name removed from it is there again, and no rename waits for its second half.
    var isSettled: Bool { unsettled.isEmpty && moves.isEmpty }

    var hasPending: Bool { !changed.isEmpty || !renames.isEmpty || !flags.isEmpty || !moves.isEmpty }

    static func now() -> Int64 { WatchBatch.now() }

    func noteEvent() {
        let now = Self.now()
        if !hasPending {
            firstEventNs = now
            quickBatch = now - lastActivityNs >= delayNs
        }
        lastEventNs = now
        lastActivityNs = now
    }

    /// Notes an event at `path`; whether the path joined the batch (not the node's own write).
    @discardableResult
    func noteChanged(_ path: String) -> Bool {
        noteEvent()
        if isOwnWrite(path) { return false }
        changed.insert(PathKey(path))
        return true
    }

    func isOwnWrite(_ path: String) -> Bool {
        owner?.shared.withLock { state in
            if state.ownWrites.isEmpty { return false }
            var candidate = Substring(path)
            while true {
                if state.ownWrites[PathKey(String(candidate))] != nil { return true }
                guard let slash = candidate.lastIndex(of: "/") else { return false }
                candidate = candidate[..<slash]
            }
        } ?? false
    }

    func flush() {
        // A directory moved out of the folder, or into one not watched yet (no MOVED_TO):
        // its watches would report under stale paths. A directory that has the name now
        // (made since) is watched again, and what it holds reported.
        for (_, move) in moves where move.isDirectory {
            unwatch(move.path)
            if move.reportable && isDirectory(move.path) { watchNewDirectory(move.path, report: true) }
        }
        moves.removeAll()
        let newestEventNs = lastEventNs
        var batch = changed.sorted().map { WatchChange.changed($0.string) }
        batch += renames.map { WatchChange.renamed(from: $0.0, to: $0.1) }
        for flag in flags {
            if case .watchLimitReached = flag { batch.append(flag) }
        }
        if flags.contains(.overflow) { batch.append(.overflow) }
        if flags.contains(.rootGone) { batch.append(.rootGone) }
        changed.removeAll()
        unsettled.removeAll()
        renames.removeAll()
        flags.removeAll()
        if rootGone {
            finished = true
            for (wd, _) in directories { inotify_rm_watch(inotify, wd) }
            directories.removeAll()
            descriptors.removeAll()
            owner?.shared.withLock { $0.watchCount = 0 }
        }
        if !batch.isEmpty { onBatch(WatchBatch(changes: batch, newestEventNs: newestEventNs)) }
    }
}
