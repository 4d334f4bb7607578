internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// Files of a folder found damaged while serving them: a chunk read for a member did not hash
/// to what the index recorded, though the file's size, mtime and inode are still those the
/// index recorded when it hashed it (bit rot, or an edit that restored the mtime). Such a
/// file is never served as it is; it is checked and repaired once (`SharedFolder.servedDamage`),
/// and listed by `status` until it is repaired, verified, or changed.
///
/// Bounds: a file is noted once per stamp, whatever number of requests find it (a member
/// asking 10,000 times starts one check); at most `tracked` files are held at once (beyond
/// that, damage is still refused and said, but not checked: `syncpeer verify` is the scrub).
final class DamagedFiles: Sendable {
    /// Files held at once.
    static let tracked = 100

    struct Entry: Sendable, Equatable {
        var path: String
        /// The stamp the index recorded, under which the bytes did not match.
        var stamp: NodeIndex.FileStamp
        /// Why it could not be repaired; nil while it is checked.
        var unrepaired: String?
    }

    private let files = Mutex<[PathKey: Entry]>([:])

    /// Notes `path` found damaged under `stamp`: true when this is news (its check starts
    /// now), false when it is noted already under that stamp, or too many files are.
    func note(_ path: String, stamp: NodeIndex.FileStamp) -> Bool {
        files.withLock { files in
            let key = PathKey(path)
            if files[key]?.stamp == stamp { return false }
            guard files[key] != nil || files.count < Self.tracked else { return false }
            files[key] = Entry(path: path, stamp: stamp)
            return true
        }
    }

    /// `path` could not be repaired, for `reason`.
    func unrepaired(_ path: String, reason: String) {
        files.withLock { $0[PathKey(path)]?.unrepaired = reason }
    }

    /// `path` is no longer damaged (repaired, found intact, or changed since).
    func clear(_ path: String) {
        _ = files.withLock { $0.removeValue(forKey: PathKey(path)) }
    }

    /// A scrub (`syncpeer verify`) read every file: the damaged ones are those it could not repair.
    func keep(only paths: Set<PathKey>) {
        files.withLock { $0 = $0.filter { paths.contains($0.key) } }
    }

    /// The files held, in path order.
    var entries: [Entry] {
        files.withLock { $0.sorted { $0.key < $1.key }.map(\.value) }
    }
}
