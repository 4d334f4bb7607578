#if canImport(Glibc)
internal import Glibc
#endif
internal import PeerFiles
internal import Synchronization

/// The folder's ignore patterns as serving reads them: re-read from the root's
/// `.syncpeerignore` when its stamp (inode, size, mtime, ctime) differs from the one they were
/// read at. The folder's `io` loads the patterns too, but a pull holds `io` until its batch
/// ends: a pattern the user added by hand meanwhile would only take effect after the pull,
/// and a member could fetch what it excludes (a chunk of the very file being pulled) until
/// then. One `lstat` per block request; the file is read only when it changed.
final class ServedRules: Sendable {
    struct Stamp: Equatable, Sendable {
        let inode: UInt64
        let size: Int64
        let mtimeNs: Int64
        let ctimeNs: Int64
        /// No ignore file.
        static let absent = Stamp(inode: 0, size: -1, mtimeNs: 0, ctimeNs: 0)
    }

    private let loaded = Mutex<(stamp: Stamp, patterns: IgnorePatterns)?>(nil)

    /// The patterns of the ignore file under `root` now, and whether they differ from those
    /// last read (nil when the file cannot be read).
    func patterns(root: String) -> (patterns: IgnorePatterns, changed: Bool)? {
        guard let stamp = Self.stamp(root + "/" + IgnorePatterns.fileName) else { return nil }
        if let known = loaded.withLock({ $0 }), known.stamp == stamp { return (known.patterns, false) }
        let patterns: IgnorePatterns
        if stamp == .absent {
            patterns = IgnorePatterns()
        } else {
            guard let read = (try? DirectoryHandle(path: root)).flatMap({ try? IgnorePatterns.load(from: $0) }) else { return nil }
            patterns = read
        }
        let first = loaded.withLock { known in
            defer { known = (stamp, patterns) }
            return known == nil
        }
        return (patterns, !first)
    }

    /// The file's stamp, `.absent` when there is none, nil when it cannot be read.
    static func stamp(_ path: String) -> Stamp? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return errno == ENOENT ? .absent : nil }
        return Stamp(inode: UInt64(st.st_ino), size: Int64(st.st_size),
                     mtimeNs: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec),
                     ctimeNs: Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec))
    }
}
