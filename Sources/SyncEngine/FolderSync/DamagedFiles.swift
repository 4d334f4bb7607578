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
/// asking 10,000 times starts one check), and a chunk found rotten is refused again without
/// being read (`isRotten`: a member asking for it again costs us no read nor hash); at most
/// `tracked` files are held at once, with at most `rottenChunks` chunks each (beyond that,
/// damage is still refused when it is read, but not checked: `syncpeer verify` is the scrub).
final class DamagedFiles: Sendable {
    /// Files held at once.
    static let tracked = 100
    /// Rotten chunks remembered per file.
    static let rottenChunks = 256

    struct Entry: Sendable, Equatable {
        var path: String
        /// The stamp the index recorded, under which the bytes did not match.
        var stamp: NodeIndex.FileStamp
        /// Why it could not be repaired; nil while it is checked.
        var unrepaired: String?
        /// Offsets of the chunks found rotten.
        var rotten: Set<UInt64> = []
    }

    private let files = Mutex<[PathKey: Entry]>([:])

    /// Notes `path` found damaged under `stamp`: true when this is news (its check starts
    /// now), false when it is noted already under that stamp, or too many files are.
    func note(_ path: String, stamp: NodeIndex.FileStamp, offset: UInt64) -> Bool {
        files.withLock { files in
            let key = PathKey(path)
            if files[key]?.stamp == stamp {
                if files[key]!.rotten.count < Self.rottenChunks { files[key]!.rotten.insert(offset) }
                return false
            }
            guard files[key] != nil || files.count < Self.tracked else { return false }
            files[key] = Entry(path: path, stamp: stamp, rotten: [offset])
            return true
        }
    }

    /// Whether the chunk at `offset` of `path` was found rotten under `stamp` (the file not
    /// repaired nor changed since): refused without reading it again.
    func isRotten(_ path: String, stamp: NodeIndex.FileStamp, offset: UInt64) -> Bool {
        files.withLock { files in
            guard !files.isEmpty, let entry = files[PathKey(path)] else { return false }
            return entry.stamp == stamp && entry.rotten.contains(offset)
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
