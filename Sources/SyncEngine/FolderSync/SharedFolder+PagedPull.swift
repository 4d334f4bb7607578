internal import PeerFiles

extension SharedFolder {
    /// Plans and applies `paths` (local changes a rescan of some paths found, to be planned
    /// again against what peers sent) `planPage` paths at a time, in path order: a pull plans
    /// with the local and peers' states and manifests of all its paths in memory at once, and a
    /// rescan of 100,000 new files planned them in one pull (B, 100,000 files of 4 KiB: alice
    /// peaked at 626–692 MiB, most of it that plan, with bob's echo of the files stored by then).
    /// A page is planned on its own: what spans two pages (a peer's rename whose halves fall
    /// apart) is applied as its parts, a deletion and a new file whose content is found here.
    func pull(pagesOf paths: Set<PathKey>) {
        var page = Set<PathKey>()
        for path in paths.sorted(by: { $0.string < $1.string }) {
            page.insert(path)
            if page.count == Self.planPage {
                pull(paths: page)
                page.removeAll(keepingCapacity: true)
            }
        }
        if !page.isEmpty { pull(paths: page) }
    }
}
