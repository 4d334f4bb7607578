internal import PeerModel
internal import PeerFiles

/// A move is not a mass deletion. A peer's move reaches us as a deletion and a new path with
/// the same content; `SyncPlanner.planRenames` makes them one rename when one pull plans both.
/// They can also arrive in separate pulls of one burst: the peer's scanner records (and
/// announces) what it found before what vanished, so under load its index update can carry
/// the new paths before the deletions. So the guard pairs, by content (root hash), each
/// deletion with a placement of the same content at another path anywhere in the burst, in
/// either order, and does not count the pair: the data is still here. What it pairs is
/// bounded (`trackedLimit`); past that, deletions count (the folder asks rather than guesses).
extension MassChangeGuard {
    /// Paths each of `burstDeleted` and `burstPlaced` holds at most (~200 bytes each), and
    /// of one content (a scan of a content's paths stays short).
    static let trackedLimit = 10_000
    static let trackedPerContent = 64

    /// Paths by content (root hash), at most `trackedLimit` of them, `trackedPerContent` each.
    struct Tally: Sendable, Equatable {
        private(set) var paths: [[UInt8]: [PathKey]] = [:]
        private(set) var count = 0

        /// Adds `path` with `hash`, unless the tally is full.
        mutating func add(_ hash: [UInt8], at path: PathKey) {
            guard count < MassChangeGuard.trackedLimit, paths[hash, default: []].count < MassChangeGuard.trackedPerContent else { return }
            paths[hash, default: []].append(path)
            count += 1
        }

        /// Forgets `path` with `hash` (its content goes: no move lands there any more).
        mutating func remove(_ hash: [UInt8], at path: PathKey) {
            _ = take(hash) { $0 == path }
        }

        /// Takes out one path holding `hash` other than `path`; whether there was one.
        mutating func take(_ hash: [UInt8], notAt path: PathKey) -> Bool {
            take(hash) { $0 != path }
        }

        private mutating func take(_ hash: [UInt8], where matches: (PathKey) -> Bool) -> Bool {
            guard var list = paths[hash], let n = list.firstIndex(where: matches) else { return false }
            list.remove(at: n)
            paths[hash] = list.isEmpty ? nil : list
            count -= 1
            return true
        }
    }

    /// What one pull would do to the folder's content, for the guard.
    struct Change: Sendable, Equatable {
        /// Live local files it replaces, or deletes with no content hash to pair.
        var counted = 0
        /// The live local files it deletes, by their content.
        var deleted: [(hash: [UInt8], path: PathKey)] = []
        /// Paths it places content at that they did not hold (a new file, or new content).
        var placed: [(hash: [UInt8], path: PathKey)] = []
        /// The live local files whose content it replaces, by their old content.
        var replaced: [(hash: [UInt8], path: PathKey)] = []

        init(counted: Int = 0) { self.counted = counted }

        init(_ actions: [SyncAction], local: [PathKey: FileEntry]) {
            for action in actions {
                switch action {
                case .pull(let state, _):
                    let path = PathKey(state.path), old = local[path]
                    if MassChangeGuard.affected(action, local: old) {
                        counted += 1
                        if let hash = old?.rootHash { replaced.append((hash, path)) }
                    }
                    guard state.kind == .file, !state.deleted, let hash = state.rootHash,
                          !(old.map { state.hasSameContent(as: $0) } ?? false) else { continue }
                    placed.append((hash, path))
                case .delete(let state, _):
                    let path = PathKey(state.path), old = local[path]
                    guard MassChangeGuard.affected(action, local: old) else { continue }
                    if let hash = old?.rootHash { deleted.append((hash, path)) } else { counted += 1 }
                default:
                    continue
                }
            }
        }

        /// Files it deletes or replaces, before any pairing.
        var affected: Int { counted + deleted.count }

        static func == (a: Change, b: Change) -> Bool {
            a.counted == b.counted && a.deleted.elementsEqual(b.deleted, by: ==) && a.placed.elementsEqual(b.placed, by: ==)
                && a.replaced.elementsEqual(b.replaced, by: ==)
        }
    }

    /// Pairs `change` with the burst: its deletions with content this pull or an earlier one
    /// of the burst placed at another path, then its remaining placements with the burst's
    /// earlier counted deletions at another path. A placement pairs once, and only while
    /// its path still holds it: deleting or replacing it there forgets it (so deleting
    /// both halves of a move counts one file). Returns how many of its files count, and how
    /// many of the burst's counted files it takes back.
    mutating func pair(_ change: Change) -> (counted: Int, takenBack: Int) {
        var placedNow = Tally()
        for (hash, path) in change.placed { placedNow.add(hash, at: path) }
        var counted = change.counted
        for (hash, path) in change.replaced { burstPlaced.remove(hash, at: path) }
        for (hash, path) in change.deleted {
            burstPlaced.remove(hash, at: path)
            if placedNow.take(hash, notAt: path) || burstPlaced.take(hash, notAt: path) { continue }
            counted += 1
            burstDeleted.add(hash, at: path)
        }
        var takenBack = 0
        for (hash, list) in placedNow.paths {
            for path in list {
                if burstDeleted.take(hash, notAt: path) { takenBack += 1 } else { burstPlaced.add(hash, at: path) }
            }
        }
        return (counted, takenBack)
    }
}
