internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// `syncpeer revert DIR`: a folder's local changes that stay back from a receive-only peer
/// are undone — each path takes the cluster's version again (the newest state the roles let
/// in), the local file kept in the versions store first (reason `revert`: `history`,
/// `restore`).
extension SharedFolder {
    /// Reverts up to `limit` locally changed paths, keeping their local files in the versions
    /// store (a path whose file cannot be kept whole stays as it is; a folder whose policy is
    /// `none` keeps nothing). Returns how many paths were planned. On io. An index read that
    /// fails throws before anything is changed (an empty answer would read as "no peer has
    /// it": the local file deleted).
    func revertLocalChanges(localDevice: String, limit: Int = 100_000) throws(IndexError) -> Int {
        dispatchPrecondition(condition: .onQueue(io))
        guard let index, let host, checkRoot() else { return 0 }
        try loadPolicies(index: index)
        var paths: [String] = []
        var after: String?
        while paths.count < limit {
            let page = try roleDifferences(after: after, limit: 500, localDevice: localDevice)
            for item in page.items where item.kind == .locallyChanged && paths.last != item.path { paths.append(item.path) }
            guard page.more, let last = page.items.last?.path else { break }
            after = last
        }
        var actions: [SyncAction] = []
        var plan = Plan()
        var kept: Set<PathKey> = []
        let keeper = host.versions.flatMap { $0.keeps(folderID: id) ? $0 : nil }
        for start in stride(from: 0, to: paths.count, by: Self.deletionBatch) {
            let chunk = Array(paths[start..<min(paths.count, start + Self.deletionBatch)])
            let local = try index.files(folderID: id, paths: chunk, includeChunks: false, keyedBy: PathKey.init(_:))
                .mapValues(FileState.init)
            let entries = try index.remoteFiles(folderID: id, paths: chunk, keyedBy: PathKey.init(_:))
                .flatMap { $0.value.map { ($0.key, $0.value) } }
            let (remotes, manifests) = Self.peerStates(entries, members: state.withLock { Set($0.policies.keys) })
            let admitted = admitted(remotes, local: local)
            for path in chunk.map(PathKey.init(_:)) {
                guard let ours = local[path] else { continue }
                let action = Self.revertAction(ours: ours, cluster: admitted[path] ?? [:], localDevice: localDevice)
                guard let action else { continue }
                // Its content goes unless only its metadata changes.
                let replaces = if case .updateMetadata = action { false } else { true }
                if replaces, !ours.deleted, ours.kind == .file, let keeper {
                    let record = ours.fileRecord(folderID: id, inode: nil, chunks: [])
                    guard keeper.keepFile(at: root + "/" + path.string, as: record, reason: "revert", whole: true) != nil else {
                        report("revert: cannot keep the local version of \(path.string) in the versions store, left as it is")
                        continue
                    }
                    kept.insert(path)
                }
                actions.append(action)
                plan.local[path] = ours
                plan.remotes[path] = remotes[path]
                plan.manifests[path] = manifests[path]
            }
        }
        guard !actions.isEmpty else { return 0 }
        setStatus(.syncing)
        let applier = FolderApplier(folder: self, host: host, index: index, local: plan.local, remotes: plan.remotes,
                                    manifests: plan.manifests, blocks: [:])
        applier.keptBefore = kept
        applier.apply(actions)
        recordOutcome(applier.failures, actions: actions)
        setStatus(.idle)
        announcePulled()
        return actions.count
    }

    /// The action that puts the cluster's version of a path back over ours: the newest of
    /// the admitted peers' states (conflict rules between concurrent ones), recorded with a
    /// version above both (so no peer takes our undone change for newer) and its author's
    /// name (it is no longer a local change); nothing anywhere: our file is deleted. Pure.
    static func revertAction(ours: FileState, cluster: [String: FileState], localDevice: String) -> SyncAction? {
        let newest = cluster.filter { candidate in
            !cluster.values.contains { $0.version.compare(candidate.value.version) == .greater }
        }
        guard let (device, theirs) = newest.sorted(by: { $0.key < $1.key })
            .reduce(nil as (String, FileState)?, { best, next in best.map { ConflictRules.beats(next.value, $0.1) ? (next.key, next.value) : $0 } ?? (next.key, next.value) })
        else {
            guard !ours.deleted else { return nil }
            var gone = ours.with(version: ours.version.incremented(for: localDevice))
            (gone.deleted, gone.size, gone.rootHash, gone.symlinkTarget) = (true, 0, nil, nil)
            return .delete(gone, from: localDevice)
        }
        var target = theirs.with(version: ours.version.merged(with: theirs.version).incremented(for: localDevice))
        // Under its author's name, no longer a local change, unless that author is us (a file
        // we wrote before the role): then under the holder's, or the record would count as
        // "locally changed", never reach a receive-only peer, and its next edit would conflict.
        target.modifiedBy = theirs.modifiedBy == localDevice ? device : theirs.modifiedBy
        if target.deleted { return ours.deleted ? nil : .delete(target, from: device) }
        if !ours.deleted, ours.hasSameContent(as: target) { return .updateMetadata(target, from: device) }
        return .pull(target, from: device)
    }
}
