internal import SyncEngine

/// One shared folder and how far it is (`Session.folders`).
public struct FolderStatus: Sendable, Equatable {
    public let folderID: String
    public let label: String
    public let path: String
    public let state: FolderState
    /// Why it stopped, when `state` is `.error`.
    public let error: String?
    public let files: Int
    public let bytes: Int64
    public let conflicts: Int
    /// Paths that cannot be pulled now.
    public let failing: Int
    public let members: [Member]

    /// A peer the folder is shared with, and what it is missing.
    public struct Member: Sendable, Equatable {
        public let peer: PeerID
        public let connected: Bool
        public let outOfSyncFiles: Int
        public let outOfSyncBytes: Int64
        /// How much of the folder it has, 0–100.
        public let percent: Int
    }
}

extension Node {
    /// One page of the shared folders as the API shows them (the engine's `FolderStatus`,
    /// whose name the API's hides in this module, is only inferred here).
    func apiFolders(_ request: PageRequest) throws(EngineError) -> Page<FolderStatus> {
        let page = try folderStatus(request)
        let items = page.items.map { status in
            FolderStatus(folderID: status.folder, label: status.label, path: status.path,
                         state: FolderState(engine: status.state.rawValue), error: status.error, files: status.files,
                         bytes: status.bytes, conflicts: status.conflicts, failing: status.failing,
                         members: status.peers.map {
                             FolderStatus.Member(peer: PeerID($0.peer), connected: $0.connected, outOfSyncFiles: $0.outOfSyncFiles,
                                                 outOfSyncBytes: $0.outOfSyncBytes, percent: $0.percent)
                         })
        }
        return Page(items: items, next: page.next)
    }
}
