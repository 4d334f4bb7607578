internal import FoundationEssentials
internal import PeerIndex

/// Versions, history and restore (issue 41): the public API the control server and the
/// library call, handed to `FolderService`.
extension Node {
    /// `syncpeer history PATH`.
    package func history(path: String) throws(EngineError) -> HistoryResult {
        try folders.history(path: path, localName: identity.displayName)
    }

    /// `syncpeer restore PATH [--at TIME | --version ID] [--to NEWPATH]`; `progress` gets its
    /// `transfer` events (bytes of the whole restore, a few a second, then the last one).
    package func restore(path: String, at: Int64?, version: String?, to: String?,
                        progress: ((TransferInfo) -> Void)? = nil) throws(EngineError) -> RestoreResult {
        try folders.restore(path: path, at: at, version: version, to: to, progress: progress)
    }

    /// `syncpeer versions DIR [POLICY]`: shows (and with `policy`, sets) a shared folder's policy.
    package func versionsPolicy(directory: String, policy text: String?) throws(EngineError) -> VersionsPolicyResult {
        guard let keeper = folders.versions else { throw .io(path: directory, reason: "this node keeps no versions") }
        let (folder, relative) = try folders.folder(holding: directory)
        guard relative.isEmpty else { throw .invalidArgument("\(directory) is inside a shared folder, not one: give \(folder.root)") }
        if let text {
            guard let policy = VersionPolicy(parsing: text) else {
                throw .invalidArgument("'\(text)' is not a versions policy: none, trashcan DAYS, simple N or staggered [DAYS], each optionally followed by 'cap SIZE' (bytes with K/M/G/T, or N%)")
            }
            do { try keeper.setPolicy(policy, folderID: folder.id) } catch {
                throw .io(path: directory, reason: "cannot record the policy: \(error.description)")
            }
            folders.expireVersionsSoon()
        }
        let count = ((try? folders.index.versionAges(folderID: folder.id)) ?? []).count
        return VersionsPolicyResult(folder: folder.id, path: folder.root, policy: keeper.policy(folderID: folder.id).description,
                                    versions: count, storeBytes: keeper.store.storedBytes())
    }
}
