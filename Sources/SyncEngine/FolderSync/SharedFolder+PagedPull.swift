internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerModel
internal import Synchronization

/// How a rescan's changes are planned again, a page at a time: its page size (a knob for
/// tests) and what it did (pages pulled, the most paths held at once).
final class RescanReplan: Sendable {
    struct Counts: Sendable {
        var pages = 0
        var paths = 0
        var mostHeld = 0
    }
    private let state = Mutex<(page: Int, counts: Counts)>((SharedFolder.planPage, Counts()))

    /// Paths planned together (default `SharedFolder.planPage`).
    var page: Int { state.withLock { $0.page } }
    func setPage(_ size: Int) { state.withLock { $0.page = max(1, size) } }
    var counts: Counts { state.withLock { $0.counts } }

    fileprivate func pulled(_ paths: Int) {
        state.withLock { state in
            state.counts.pages += 1
            state.counts.paths += paths
            state.counts.mostHeld = max(state.counts.mostHeld, paths)
        }
    }
}

extension SharedFolder {
    /// Plans and applies again what a rescan of some paths changed (a local change may
    /// conflict with a state a peer sent before the scan saw it), `rescanReplan.page` paths at
    /// a time. The paths are not collected while scanning (at 100,000 new files, B, that set
    /// held ~10 MB until the scan ended): every record the scan wrote carries a local sequence
    /// above `start`, the folder's highest before it, so they are read back from the index
    /// in sequence order, one page at a time, through the highest after it. What a page's own
    /// pull writes lies past that and is not read again. A pull plans with the local and
    /// peers' states and manifests of its paths in memory at once (a rescan of 100,000 new
    /// files planned in one pull: alice peaked at 626–692 MiB); a page is planned on its own,
    /// so what spans two pages (a peer's rename whose halves fall apart) is applied as its
    /// parts, a deletion and a new file whose content is found here.
    func pullChanges(after start: Int64, index: NodeIndex) {
        dispatchPrecondition(condition: .onQueue(io))
        let end: Int64
        do { end = try index.maxSequence(folderID: id) } catch { indexFailed("the pull of a scan's changes", error); return }
        let size = rescanReplan.page
        var after = start
        while after < end {
            let records: [FileRecord]
            do { records = try index.files(folderID: id, since: after, limit: size, includeChunks: false) } catch {
                indexFailed("the pull of a scan's changes", error)
                return
            }
            let page = Set(records.lazy.filter { $0.entry.sequence <= end }.map { PathKey($0.path) })
            if !page.isEmpty {
                rescanReplan.pulled(page.count)
                pull(paths: page)
            }
            guard records.count == size, let last = records.last?.entry.sequence else { break }
            after = last
        }
    }
}
