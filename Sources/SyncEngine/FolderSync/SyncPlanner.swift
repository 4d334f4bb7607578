package import PeerModel
internal import PeerFiles

/// What to do about one path, decided from the local state and the peers' states.
package enum SyncAction: Sendable, Hashable {
    /// Nothing to do: the local version has seen every peer's change.
    case upToDate
    /// Fetch the content (file bytes, a directory, a symlink) of `state` from `from` and
    /// record `state` locally. Also replaces a local path of another kind.
    case pull(FileEntry, from: String)
    /// The local content is already right; apply the metadata (mode, mtime) of `state`
    /// and record it. Moves no data.
    case updateMetadata(FileEntry, from: String)
    /// Remove the local path (if present) and record the tombstone `state`, whose version
    /// dominates the local one.
    case delete(FileEntry, from: String)
    /// Concurrent versions where the local one wins over tombstones or equal content: keep
    /// the disk as is and record `state` (the local state with their versions merged), so
    /// peers take it. (Over a peer's live edit the local state stays as it is: that peer
    /// keeps its edit as a conflict copy first.)
    case keepLocal(FileEntry)
    /// Concurrent versions where the local one loses and its content differs: move the
    /// local path to `loserCopyName` (it is then scanned and synced as a new file), then
    /// fetch `winner` from `from` and record it. `winner` carries the merged version.
    case conflict(winner: FileEntry, from: String, loser: FileEntry, loserCopyName: String)
    /// A deletion and a creation of the same content in one batch: rename the local
    /// path `from.path` to `to.path` (no data moves), record the tombstone `from` and `to`.
    case rename(from: FileEntry, to: FileEntry, source: String)

    /// The paths the action changes locally.
    package var paths: [String] {
        switch self {
        case .upToDate: []
        case .pull(let s, _), .updateMetadata(let s, _), .delete(let s, _), .keepLocal(let s): [s.path]
        case .conflict(let winner, _, _, let copy): [winner.path, copy]
        case .rename(let from, let to, _): [from.path, to.path]
        }
    }
}

/// Decides, for one path, what the local side does given its own state and the states
/// of the peers that share the folder. Pure: no I/O, deterministic, the same inputs give
/// the same action on every node, which is what makes replicas converge.
///
/// Rules:
/// - Versions are compared by dominance. States dominated by another are ignored; if the
///   local state dominates every peer's, nothing happens.
/// - One newest state (strictly newer than ours): take it (`pull`, `updateMetadata` when
///   only metadata differs, `delete` when it is a tombstone).
/// - Concurrent newest states: the winner is chosen by `ConflictRules.beats` (a live
///   entry beats a tombstone, a directory beats a file, the newer mtime wins, then the
///   larger device ID). A losing local file keeps its content as a conflict copy; a
///   losing local tombstone simply takes the edit (delete-vs-modify: the edit wins,
///   nothing is lost). The winner is recorded with the merged version of the states whose
///   content survives here (the winner, ours, tombstones, equal content); a peer's losing
///   edit is never merged by another node, so that the peer sees the conflict itself and
///   keeps its edit as a copy. Once it has, its merged version dominates everywhere and
///   every node ends on the same record.
/// - A path is deleted only when a tombstone's version dominates the local version.
package struct SyncPlanner: Sendable {
    /// Our device ID: the counter a tie between equal versions is broken with (nil: ties
    /// are left as they are, for tests of the other rules).
    package var localDevice: String?

    package init(localDevice: String? = nil) {
        self.localDevice = localDevice
    }

    /// The action for one path. `remotes` maps device ID → that peer's state of the path.
    package func plan(local: FileEntry?, remotes: [String: FileEntry]) -> SyncAction {
        var candidates: [(device: String?, state: FileEntry)] = []
        if let local { candidates.append((nil, local)) }
        // A peer's entry with an empty version counts no change at all: it is malformed, ignore it.
        for device in remotes.keys.sorted() where !remotes[device]!.version.isEmpty {
            candidates.append((device, remotes[device]!))
        }

        // The newest states: not dominated by any other.
        let maximal = candidates.filter { c in
            !candidates.contains { $0.state.version.compare(c.state.version) == .greater }
        }
        if let tie = breakTie(local: local, maximal: maximal) { return tie }
        // One representative per distinct version: local when it is among them, else
        // the state with the highest precedence (ties: first device in order).
        var representatives: [(device: String?, state: FileEntry)] = []
        for c in maximal {
            if let i = representatives.firstIndex(where: { $0.state.version == c.state.version }) {
                let current = representatives[i]
                if current.device != nil && (c.device == nil || ConflictRules.beats(c.state, current.state)) {
                    representatives[i] = c
                }
            } else {
                representatives.append(c)
            }
        }
        guard !representatives.isEmpty else { return .upToDate }

        if representatives.count == 1 {
            let newest = representatives[0]
            guard let device = newest.device else { return .upToDate }
            if let local, local.version == newest.state.version { return .upToDate }
            return take(newest.state.with(version: newest.state.version), from: device, local: local)
        }

        // Concurrent versions.
        let winner = representatives.dropFirst().reduce(representatives[0]) { ConflictRules.beats($1.state, $0.state) ? $1 : $0 }
        // Our live content loses, and is kept as a conflict copy, unless the winner or an edit
        // of other content was built on it. (It may be dominated by a peer's state with the
        // same content: a version merged elsewhere; that one losing does not make ours superseded.)
        var localLoses = false
        if let local, !local.deleted, winner.device != nil, !local.hasSameContent(as: winner.state),
           winner.state.version.compare(local.version) != .greater {
            localLoses = !candidates.contains { $0.state.version.compare(local.version) == .greater && !$0.state.hasSameContent(as: local) }
        }
        // The version recorded here merges only versions whose content is not lost by it: the
        // winner's, our own (it wins, becomes the conflict copy, or a newer state built on it),
        // tombstones, states with the winner's content, and those with ours when we keep a copy.
        // A peer's losing edit with other content stays concurrent with what we record: that
        // peer keeps it as a conflict copy and merges then. A version that dominated it would
        // reach that peer as a plain update (through us, before it has seen the winner itself)
        // and its edit would be lost everywhere.
        var merged = winner.state.version.merged(with: local?.version ?? VersionVector())
        for other in representatives where other.state.deleted || other.state.hasSameContent(as: winner.state)
            || (localLoses && local.map(other.state.hasSameContent(as:)) == true) {
            merged = merged.merged(with: other.state.version)
        }
        guard let winnerDevice = winner.device else {
            return merged == winner.state.version ? .upToDate : .keepLocal(winner.state.with(version: merged))
        }
        let target = winner.state.with(version: merged)
        if let local, localLoses {
            return .conflict(winner: target, from: winnerDevice, loser: local,
                             loserCopyName: ConflictRules.conflictCopyName(of: local))
        }
        // No local state, a local tombstone, the same content, or a local state another peer built on.
        return take(target, from: winnerDevice, local: local)
    }

    /// Equal versions with different states: a tombstone and a live entry, or two contents,
    /// recorded under one version by merges made on different nodes from different sets of
    /// states (alice merges two concurrent tombstones into {A:2,B:2} while carol merges the
    /// same two with her live edit into the same {A:2,B:2}). Versions cannot order them, and
    /// the representative rule keeps each node on its own state for good: the folder never
    /// converges (make chaos seed 1016). When every newest state has our version, the
    /// conflict rules pick the winner and it is recorded with our change on top, so it
    /// dominates every tied state and spreads; a losing live local edit is kept as a
    /// conflict copy first. A tied peer breaks the tie the same way at the same time: both
    /// then hold the winner under concurrent versions with the same content, which merge
    /// without a change of anyone's, so the tie break never repeats.
    private func breakTie(local: FileEntry?, maximal: [(device: String?, state: FileEntry)]) -> SyncAction? {
        guard let localDevice, let local, maximal.allSatisfy({ $0.state.version == local.version }) else { return nil }
        let tied = maximal.filter { $0.device != nil && !$0.state.hasSameContentAndMetadata(as: local) }
        guard !tied.isEmpty else { return nil }
        let winner = tied.reduce((device: String?.none, state: local)) { ConflictRules.beats($1.state, $0.state) ? $1 : $0 }
        let version = local.version.incremented(for: localDevice)
        guard let device = winner.device else { return .keepLocal(local.with(version: version)) }
        let target = winner.state.with(version: version)
        if !local.deleted, !local.hasSameContent(as: winner.state) {
            return .conflict(winner: target, from: device, loser: local,
                             loserCopyName: ConflictRules.conflictCopyName(of: local))
        }
        return take(target, from: device, local: local)
    }

    /// Plans every path of a batch (in byte order); `remotes` maps path → (device → state).
    func plan(local: [PathKey: FileEntry], remotes: [PathKey: [String: FileEntry]]) -> [SyncAction] {
        let paths = Set(local.keys).union(remotes.keys).sorted()
        return paths.map { plan(local: local[$0], remotes: remotes[$0] ?? [:]) }.filter { $0 != .upToDate }
    }

    /// Adopting a newer state that is not in conflict with ours.
    private func take(_ state: FileEntry, from device: String, local: FileEntry?) -> SyncAction {
        if state.deleted { return .delete(state, from: device) }
        if let local, !local.deleted, local.hasSameContent(as: state) { return .updateMetadata(state, from: device) }
        return .pull(state, from: device)
    }

    /// Turns a `.delete` of a live local file and a `.pull` of a new path with the same
    /// content (root hash) into one `.rename`: the data is already here. Each deletion and
    /// each pull pairs at most once; pairs are made in path order, so the result is
    /// deterministic. A rename takes the pull's place in the list; the delete is dropped.
    static func planRenames(_ actions: [SyncAction], local: [PathKey: FileEntry]) -> [SyncAction] {
        var deletesByContent: [[UInt8]: [(index: Int, tombstone: FileEntry)]] = [:]
        for (index, action) in actions.enumerated() {
            guard case .delete(let tombstone, _) = action, let old = local[PathKey(tombstone.path)], !old.deleted,
                  old.kind == .file, let hash = old.rootHash else { continue }
            deletesByContent[hash, default: []].append((index, tombstone))
        }
        for key in deletesByContent.keys { deletesByContent[key]!.sort { PathKey($0.tombstone.path) < PathKey($1.tombstone.path) } }

        let pullOrder = actions.indices.filter {
            guard case .pull(let state, _) = actions[$0] else { return false }
            return state.kind == .file && !state.deleted && state.rootHash != nil
                && (local[PathKey(state.path)].map { $0.deleted } ?? true)
        }.sorted {
            guard case .pull(let a, _) = actions[$0], case .pull(let b, _) = actions[$1] else { return false }
            return PathKey(a.path) < PathKey(b.path)
        }
        var result = actions.map { Optional($0) }
        for index in pullOrder {
            guard case .pull(let state, let device) = actions[index], let hash = state.rootHash,
                  var candidates = deletesByContent[hash], !candidates.isEmpty else { continue }
            let match = candidates.removeFirst()
            deletesByContent[hash] = candidates
            result[index] = .rename(from: match.tombstone, to: state, source: device)
            result[match.index] = nil
        }
        return result.compactMap { $0 }
    }
}

/// The deterministic rules that pick a winner between concurrent versions and name the
/// conflict copy.
package enum ConflictRules {
    /// Whether `a` wins over `b` when their versions are concurrent. A total order, so
    /// every node picks the same winner:
    /// 1. a live entry beats a tombstone (an edit is never lost to a concurrent delete);
    /// 2. a directory beats a file or symlink (the file becomes the conflict copy; a
    ///    directory cannot be moved aside without moving its children);
    /// 3. the newer mtime wins;
    /// 4. ties: the larger device ID (`modifiedBy`, byte order) wins;
    /// 5. still tied: the larger version JSON, then root hash, link target, mode, size, kind.
    package static func beats(_ a: FileEntry, _ b: FileEntry) -> Bool {
        if a.deleted != b.deleted { return !a.deleted }
        let aDir = !a.deleted && a.kind == .directory, bDir = !b.deleted && b.kind == .directory
        if aDir != bDir { return aDir }
        if a.mtimeNs != b.mtimeNs { return a.mtimeNs > b.mtimeNs }
        if a.modifiedBy != b.modifiedBy { return b.modifiedBy.utf8.lexicographicallyPrecedes(a.modifiedBy.utf8) }
        let (av, bv) = (a.version.json, b.version.json)
        if av != bv { return bv.utf8.lexicographicallyPrecedes(av.utf8) }
        let (ah, bh) = (a.rootHash ?? [], b.rootHash ?? [])
        if ah != bh { return bh.lexicographicallyPrecedes(ah) }
        let (at, bt) = (a.symlinkTarget ?? "", b.symlinkTarget ?? "")
        if at != bt { return bt.utf8.lexicographicallyPrecedes(at.utf8) }
        if a.mode != b.mode { return a.mode > b.mode }
        if a.size != b.size { return a.size > b.size }
        return b.kind.rawValue < a.kind.rawValue
    }

    /// The conflict copy's name for the losing state `loser`: made from its path, mtime,
    /// device and version only, so every node keeping that version names it alike.
    package static func conflictCopyName(of loser: FileEntry) -> String {
        conflictCopyName(for: loser.path, mtimeNs: loser.mtimeNs, device: loser.modifiedBy, version: loser.version)
    }

    /// `dir/name.sync-conflict-YYYYMMDD-HHMMSS-<device>-<tag>.ext`: the time is the loser's
    /// mtime in UTC, the device the first 7 letters and digits of the loser's `modifiedBy`
    /// (a peer's text: nothing else of it reaches the name), the tag 8 hex digits of a hash
    /// of the loser's version vector: two losing versions of one device in the same second
    /// differ in version, so in name (chaos seed 1010). The extension is what follows
    /// the last dot of the name (a leading or trailing dot does not start one), so the copy
    /// opens with the same program. The name fits NAME_MAX and differs for names that differ
    /// only at their end (`ConflictName.make`), and `syncpeer conflicts` can parse it back.
    package static func conflictCopyName(for path: String, mtimeNs: Int64, device: String, version: VersionVector) -> String {
        ConflictName.make(for: path, stamp: utcStamp(nanoseconds: mtimeNs), device: device,
                          tag: ConflictName.tag(of: Array(version.json.utf8)))
    }

    /// "YYYYMMDD-HHMMSS" in UTC for unix nanoseconds (pure arithmetic, proleptic Gregorian).
    static func utcStamp(nanoseconds: Int64) -> String {
        let seconds = floorDivide(nanoseconds, 1_000_000_000)
        let days = floorDivide(seconds, 86_400)
        let secondOfDay = seconds - days * 86_400
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ v: Int64, _ width: Int) -> String {
            let text = String(v)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(year, 4) + pad(month, 2) + pad(day, 2) + "-"
            + pad(secondOfDay / 3_600, 2) + pad(secondOfDay / 60 % 60, 2) + pad(secondOfDay % 60, 2)
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }
}
