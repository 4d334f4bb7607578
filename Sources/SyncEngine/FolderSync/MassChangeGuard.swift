internal import PeerFiles
internal import PeerIndex

/// The guard against a peer's mass change (issue 41 point 5): when applying the peers'
/// changes would delete or replace more than a share of the folder's files (default 50 %)
/// or more than a number of them (default 1,000), the folder holds them and asks the user
/// (`syncpeer confirm DIR` applies them, `syncpeer override DIR` keeps ours and sends it
/// back). Changes arrive in several pulls, so what the pulls of one burst (no pause of
/// `burstGap` between them) delete or replace adds up, against the folder as it was before
/// the burst. A move is not a deletion: a deletion whose content the burst places at another
/// path is not counted, in whichever order the two halves arrive (`Change`). Pure.
struct MassChangeGuard: Sendable, Equatable {
    /// Folders with fewer live files are not held for the share (the count limit still holds):
    /// one edit in a folder of 3 files is a third of it.
    static let minimumFiles = 10
    /// Pulls this far apart start a new burst (nanoseconds).
    static let burstGap: Int64 = 60_000_000_000

    /// A held mass change: the question the folder asks.
    struct Hold: Sendable, Equatable, CustomStringConvertible {
        /// Files the peers' changes would delete or replace (this burst).
        let affected: Int
        /// Live files the folder had before the burst.
        let files: Int

        var description: String {
            "peers' changes would delete or replace \(affected) of \(files) files; nothing was applied. "
                + "Run 'syncpeer confirm DIR' to apply them (the replaced versions are kept) "
                + "or 'syncpeer override DIR' to keep this folder's versions and send them back"
        }
    }

    var limits: FolderGuardLimits
    /// Files deleted or replaced by the pulls of the current burst, and the live files before it.
    private(set) var burstAffected = 0
    private(set) var burstFiles = 0
    private(set) var lastPullNs: Int64?
    /// The user confirmed this burst: the rest of it (pages still arriving) goes through.
    private(set) var burstConfirmed = false
    /// The burst's counted deletions, and the content its pulls placed at paths, neither
    /// paired yet: a move's two halves in separate pulls (`MassChangeGuard+Moves`).
    var burstDeleted = Tally()
    var burstPlaced = Tally()
    var lastPlacedNs: Int64?

    init(limits: FolderGuardLimits = FolderGuardLimits()) {
        self.limits = limits
    }

    /// Whether `affected` out of `files` crosses a limit (strictly more than the share or count).
    static func crosses(affected: Int, files: Int, limits: FolderGuardLimits) -> Bool {
        guard affected > 0 else { return false }
        if limits.files > 0 && affected > limits.files { return true }
        if limits.percent > 0 && files >= minimumFiles && affected * 100 > files * limits.percent { return true }
        return false
    }

    /// Judges a pull that would delete or replace `affected` files of a folder with `files`
    /// live files now, at `nowNs`. nil: apply it (and it counts towards the burst);
    /// a hold: apply nothing (the burst is left as it was). `confirmed` applies anything, and
    /// so does every later pull of the same burst (the rest of a confirmed change).
    mutating func judge(affected: Int, files: Int, nowNs: Int64, confirmed: Bool = false) -> Hold? {
        judge(Change(counted: affected), files: files, nowNs: nowNs, confirmed: confirmed)
    }

    /// Judges a pull's `change` (see `judge(affected:files:nowNs:confirmed:)`): its deletions
    /// of content the burst placed elsewhere, or places now, are not counted, and its
    /// placements take back the burst's earlier deletions of the same content.
    mutating func judge(_ change: Change, files: Int, nowNs: Int64, confirmed: Bool = false) -> Hold? {
        expire(nowNs: nowNs)
        if burstAffected == 0 { burstFiles = files }
        var after = self
        let (affected, takenBack) = after.pair(change)
        let total = burstAffected - takenBack + affected
        if confirmed { burstConfirmed = true }
        if affected > 0, !burstConfirmed, Self.crosses(affected: total, files: burstFiles, limits: limits) {
            return Hold(affected: total, files: burstFiles)
        }
        (burstDeleted, burstPlaced, burstAffected) = (after.burstDeleted, after.burstPlaced, burstAffected - takenBack)
        if !change.placed.isEmpty { lastPlacedNs = nowNs }
        if affected > 0 || confirmed {
            burstAffected = total
            lastPullNs = nowNs
        }
        return nil
    }

    /// Ends the burst once `burstGap` passed since its last counted pull (its count, its
    /// confirmation and its deletions' tally go) and forgets its placements `burstGap` after
    /// the last one: a pull does it first, and the folder's periodic tick too, so that an
    /// idle folder does not keep the tallies of its last burst (up to `trackedLimit` paths
    /// each) until its next pull.
    mutating func expire(nowNs: Int64) {
        if let last = lastPullNs, nowNs - last > Self.burstGap, burstAffected != 0 || burstConfirmed || burstDeleted.count > 0 {
            (burstAffected, burstConfirmed, burstDeleted) = (0, false, Tally())
        }
        if let last = lastPlacedNs, nowNs - last > Self.burstGap, burstPlaced.count > 0 { burstPlaced = Tally() }
    }

    /// The live local files an action deletes or replaces (content lost here, not moved: a
    /// conflict keeps ours as a copy and a rename keeps the data).
    static func affected(_ action: SyncAction, local: FileState?) -> Bool {
        guard let local, !local.deleted, local.kind == .file else { return false }
        switch action {
        case .delete: return true
        case .pull(let state, _): return !state.hasSameContent(as: local)
        default: return false
        }
    }

}
