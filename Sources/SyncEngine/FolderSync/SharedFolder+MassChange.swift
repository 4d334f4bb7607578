internal import Dispatch
internal import Foundation
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// A shared folder's guard against a peer's mass change (issue 41 point 5; the rule is
/// `MassChangeGuard`):
///
///     pull ─▶ plan ─▶ admitsMassChange ─(over the limit)─▶ hold: error + question in status, event
///                          │ under / confirmed                  ├─ confirm ─▶ pull again, replaced files kept (versions store)
///                          ▼                                    └─ override ─▶ ours recorded over theirs, sent back
///                     FolderApplier
extension SharedFolder {
    /// Whether a pull may apply `actions` (io). Over the limit, the folder holds them and
    /// asks; a confirmed hold (`massConfirmed`) lets it and the rest of its burst through.
    /// Every file they delete or replace is kept in the versions store by the applier, as
    /// any version a peer's change replaces (`FolderApplier.keepVersion`). Limits or counts
    /// the index cannot give throw: nothing is let through unjudged.
    func admitsMassChange(_ actions: [SyncAction], local: [PathKey: FileState], index: NodeIndex) throws(IndexError) -> Bool {
        dispatchPrecondition(condition: .onQueue(io))
        let confirmed = massConfirmed
        // A hold stands until the user answers: no pull of any page applies meanwhile (a
        // peer that sends the rest of its change in small pages gets nothing through).
        if !confirmed, massHold.withLock({ $0 }) != nil { return false }
        let change = MassChangeGuard.Change(actions, local: local)
        guard change.affected > 0 || confirmed else {
            let now = Self.nowNs()   // (new content only: noted, a later deletion of it is a move)
            state.withLock { _ = $0.massGuard.judge(change, files: 0, nowNs: now) }
            return true
        }
        let limits = try index.folderGuardLimits(folderID: id)
        let files = try index.liveTotals(folderID: id).files
        let now = Self.nowNs()
        let judged = state.withLock { state in
            state.massGuard.limits = limits
            return state.massGuard.judge(change, files: files, nowNs: now, confirmed: confirmed)
        }
        if let hold = judged {
            massHold.withLock { $0 = hold }
            setError("holding the peers' changes: " + (massChangeInfo?.question ?? hold.description))
            return false
        }
        if massHold.withLock({ held in defer { held = nil }; return held }) != nil { clearError() }
        state.withLock { $0.massConfirmed = false }
        return true
    }
}

extension SharedFolder {
    /// `syncpeer confirm`: a held mass change is applied by the next pull, its replaced
    /// files kept in the versions store (io). Nothing held: nothing to confirm here.
    func confirmMassChange() {
        dispatchPrecondition(condition: .onQueue(io))
        guard massHold.withLock({ $0 }) != nil else { return }
        state.withLock { $0.massConfirmed = true }
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
