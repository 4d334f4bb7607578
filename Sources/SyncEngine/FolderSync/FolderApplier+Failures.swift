internal import PeerModel
internal import PeerFiles

/// The paths an apply could not bring where its peers are, and why (the folder reports them,
/// lists them in its status and retries them as `PullRetry` says).
extension FolderApplier {
    /// Notes the version each path of `action` should end up with (what a failure is for),
    /// once a failure has made `wanted`; before that, `wantedSoFar` makes it from `ordered`.
    func noteWanted(_ action: SyncAction) {
        guard wanted != nil else { return }
        Self.forEachWanted(action) { wanted?[PathKey($0.path)] = $0 }
    }

    /// The state each path of `action` should end up with, in turn.
    static func forEachWanted(_ action: SyncAction, _ body: (FileEntry) -> Void) {
        switch action {
        case .upToDate, .keepLocal: break
        case let .pull(state, _), let .updateMetadata(state, _), let .delete(state, _): body(state)
        case let .conflict(winner, _, _, _): body(winner)
        case let .rename(from, to, _):
            body(from)
            body(to)
        }
    }

    /// What the actions performed so far want at each path, made once, at the apply's
    /// first failure.
    func wantedSoFar() -> [PathKey: FileEntry] {
        if let wanted { return wanted }
        let made = performing < 0 ? [:] : Self.wanted(by: ordered[...min(performing, ordered.count - 1)])
        wanted = made
        return made
    }

    /// Path → the state `actions` want there (the last action that names a path wins).
    static func wanted(by actions: some Sequence<SyncAction>) -> [PathKey: FileEntry] {
        var made: [PathKey: FileEntry] = [:]
        for action in actions { forEachWanted(action) { made[PathKey($0.path)] = $0 } }
        return made
    }

    /// A path that could not be applied because a place cannot be written (a rename, link,
    /// permission or index write failed): the folder reports it once per change, lists it in
    /// its status with the reason until a later pull of it succeeds, and tries it again
    /// when it changes or at the next rescan. The path keeps what it had.
    func fail(_ path: String, _ reason: String) {
        failed(path, PullFailure(.unwritable, reason))
    }

    /// A pull of `path` failed: the folder reports it (once per change) and retries it as
    /// the kind of failure says (see `PullRetry`). The first failure of a path in an apply stays.
    func failed(_ path: String, _ failure: PullFailure) {
        let key = PathKey(path)
        guard failures[key] == nil else { return }
        failures[key] = FailedPull(failure: failure, version: wantedSoFar()[key].map(PullFailure.version) ?? "")
    }
}
