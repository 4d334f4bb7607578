/// What changed in a watched folder, as reported by `FolderWatcher`.
package enum WatchChange: Sendable, Hashable, CustomStringConvertible {
    /// Something at this relative path (or below it, for a directory) was created,
    /// modified, deleted or had its metadata changed: rescan it (`FolderScanner.scan(paths:)`).
    case changed(String)
    /// A rename inside the folder (both paths are also reported as `changed`).
    case renamed(from: String, to: String)
    /// The folder root was deleted, moved or unmounted: stop syncing it (a scan throws
    /// `ScanError.rootMissing`). Nothing more is reported.
    case rootGone
    /// The kernel's event queue overflowed: events were lost, do a full rescan.
    case overflow
    /// `inotify_add_watch` failed with ENOSPC: some directories are not watched. The
    /// message says how to raise the limit; until then rely on periodic full scans.
    case watchLimitReached(String)

    package var description: String {
        switch self {
        case .changed(let path): return "changed \(path)"
        case let .renamed(from, to): return "renamed \(from) -> \(to)"
        case .rootGone: return "root gone"
        case .overflow: return "overflow"
        case .watchLimitReached(let message): return "watch limit reached: \(message)"
        }
    }
}
