internal import Dispatch
internal import PeerFiles
internal import PeerIndex

/// A peer's echo: once a peer has pulled our changes it announces its new entries, which
/// carry our versions and our content. They are stored (serving, completion and "in sync"
/// read them) but planning them finds nothing to do: in B, planning bob's echo of the
/// 10,000 paths he took was 15 % of alice's CPU.
extension SharedFolder {
    /// The paths of `pages` to plan: each page's, less those where the peer that sent it now
    /// holds an entry that changes nothing (`NodeIndex.echoedPaths`: dominated by our
    /// record, or equal to it in version, content and metadata). Such an entry cannot change
    /// what the planner decides for its path: a dominated state is never among the newest,
    /// and an equal one is represented by ours. A path another page of the batch names, or
    /// one whose earlier pull failed (the retry table plans it again), is planned as before.
    /// On `io`; an index that cannot say plans every path (the pull then says why it fails).
    func withoutEchoes(_ pages: [(paths: Set<PathKey>, device: String?)]) -> Set<PathKey> {
        dispatchPrecondition(condition: .onQueue(io))
        var batch = Set<PathKey>()
        for (paths, device) in pages {
            guard let device, let index else {
                batch.formUnion(paths)
                continue
            }
            let echoed = (try? index.echoedPaths(folderID: id, deviceID: device, paths: paths.lazy.map(\.string),
                                                 keyedBy: PathKey.init(_:))) ?? []
            batch.formUnion(echoed.isEmpty ? paths : paths.subtracting(echoed))
        }
        return batch
    }
}
