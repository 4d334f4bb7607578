#if canImport(Glibc)
internal import Glibc
#endif
internal import PeerFiles

/// The temporary files a pull assembles a path in, and the removal of those a killed
/// daemon left behind.
extension FolderApplier {
    /// The temporary name of `path` (relative to the folder), made in the directory of its
    /// final place: "." + 32 hex digits of BLAKE2b(path) + ".syncpeer-tmp", 46 bytes
    /// whatever the path. Unique per path (two names that differ only at their end get
    /// different temporaries), always within NAME_MAX, and ignored by the scanner and the
    /// watcher (`IgnorePatterns.temporarySuffix`). The one function that names them.
    static func tempName(forPath path: String) -> String {
        "." + NameTag.hex(of: Array(path.utf8), digits: 32) + IgnorePatterns.temporarySuffix
    }

    /// Whether `name` is one of our temporary names (made by `tempName(forPath:)`, or by
    /// older versions as ".name.syncpeer-tmp").
    static func isTempName(_ name: String) -> Bool {
        name.hasPrefix(".") && name.hasSuffix(IgnorePatterns.temporarySuffix)
    }

    /// Removes every temporary file below `root` (not following links, not entering the
    /// transfers' staging directory). Only called before the folder's first pull of a run,
    /// when none can be in use: any there is what a killed daemon left. Returns the paths
    /// that could not be removed, with the reason.
    static func removeLeftoverTemporaries(under root: DirectoryHandle) -> [(path: String, reason: String)] {
        removeTemporaries(in: root, at: "") { _ in false }
    }

    /// The temporary files a kept attempt left in a directory the user then moved (found at
    /// `relative`): each was made for a path at the directory's old place, and no pull looks
    /// for it here. Removed, except those that are the kept temps of `failing` paths (the
    /// retry table) at their own place. Runs on the folder's `io`, when no pull is running.
    static func removeStrandedTemporaries(under root: DirectoryHandle, movedTo relative: String,
                                          failing: some Sequence<String>) -> [(path: String, reason: String)] {
        guard let start = try? SafePath(relative).resolve(under: root), start.existing == .directory,
              let directory = try? start.directory.openSubdirectory(start.name) else { return [] }
        let kept = Set(failing.map { path in
            let parent = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            return (parent.isEmpty ? "" : parent + "/") + tempName(forPath: path)
        })
        return removeTemporaries(in: directory, at: relative, keeping: kept.contains)
    }

    /// Removes the temporary files below `start` (found at `prefix`) whose relative path
    /// `keeping` does not keep; returns those that could not be removed, with the reason.
    private static func removeTemporaries(in start: DirectoryHandle, at prefix: String,
                                          keeping: (String) -> Bool) -> [(path: String, reason: String)] {
        var failures: [(String, String)] = []
        var stack: [(DirectoryHandle, String)] = [(start, prefix)]
        while let (directory, relative) = stack.popLast() {
            guard let names = try? directory.entryNames() else { continue }
            for name in names {
                let path = relative.isEmpty ? name : relative + "/" + name
                switch directory.entryKind(name) {
                case .directory where name != IgnorePatterns.stagingDirectoryName:
                    if let child = try? directory.openSubdirectory(name) { stack.append((child, path)) }
                case .file?, .symlink?:
                    if isTempName(name), !keeping(path), unlinkat(directory.fd, name, 0) != 0, errno != ENOENT {
                        failures.append((path, String(cString: strerror(errno))))
                    }
                default:
                    continue
                }
            }
        }
        return failures
    }
}
