internal import Foundation
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// A shared folder's guard against a peer's mass change (issue 41 point 5; the rule is
/// `MassChangeGuard`):
///
///     pull ─▶ plan ─▶ admitsMassChange ─(over the limit)─▶ hold: error + question in status, event
///                          │ under / confirmed                  ├─ confirm ─▶ pull again, replaced files kept first
///                          ▼                                    └─ override ─▶ ours recorded over theirs, sent back
///                     FolderApplier
extension SharedFolder {
    /// Whether a pull may apply `actions` (io). Over the limit, the folder holds them and
    /// asks; a confirmed hold (`massConfirmed`: the store of kept versions) lets it and the
    /// rest of its burst through, keeping every file they delete or replace there first.
    func admitsMassChange(_ actions: [SyncAction], local: [PathKey: FileState], index: NodeIndex) -> Bool {
        let store = massConfirmed
        // A hold stands until the user answers: no pull of any page applies meanwhile (a
        // peer that sends the rest of its change in small pages gets nothing through).
        if store == nil, massHold.withLock({ $0 }) != nil { return false }
        let affected = MassChangeGuard.affectedCount(actions, local: local)
        guard affected > 0 || store != nil else { return true }
        if let limits = try? index.folderGuardLimits(folderID: id) { massGuard.limits = limits }
        let files = (try? index.liveTotals(folderID: id).files) ?? 0
        if let hold = massGuard.judge(affected: affected, files: files, nowNs: Self.nowNs(), confirmed: store != nil) {
            massHold.withLock { $0 = hold }
            setError("holding the peers' changes: " + (massChangeInfo?.question ?? hold.description))
            return false
        }
        if massHold.withLock({ held in defer { held = nil }; return held }) != nil { clearError() }
        massConfirmed = nil
        if let store { massKeeper = store }
        if !massGuard.burstConfirmed { massKeeper = nil }
        guard let store = massKeeper else { return true }
        for action in actions {
            guard let path = action.paths.first, let old = local[PathKey(path)],
                  MassChangeGuard.affected(action, local: old) else { continue }
            do {
                _ = try store.keepCopy(root + "/" + path, folderID: id, relative: path, author: old.modifiedBy, mtimeNs: old.mtimeNs)
            } catch {
                report("cannot keep the version of \(path) it replaces: \(error.description)")
            }
        }
        return true
    }
}

extension SharedFolder {
    /// `syncpeer confirm`: a held mass change is applied by the next pull, its replaced
    /// files kept first (io). Nothing held: nothing to confirm here.
    func confirmMassChange(keepingIn store: KeptVersions) {
        guard massHold.withLock({ $0 }) != nil else { return }
        massConfirmed = store
    }
}

extension SharedFolder {
    /// What `status` shows of a held mass change (any thread).
    var massChangeInfo: MassChangeInfo? {
        massHold.withLock { $0 }.map { hold in
            MassChangeInfo(affected: hold.affected, files: hold.files,
                           question: hold.description.replacingOccurrences(of: "DIR", with: root))
        }
    }
}
