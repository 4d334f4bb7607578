#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import Synchronization

extension FolderService {
    /// `ignores DIR [patterns]`: the folder's own ignore patterns, its root's `.syncpeerignore`
    /// (never synced: they stay on this device). With `patterns`, the file is replaced by
    /// them (at most `IgnorePatterns.maxFileSize` bytes; empty removes it) and the folder is
    /// rescanned with them, so a path no longer ignored is synced at once.
    func ignorePatterns(directory: String, replacingWith patterns: String?) throws(EngineError) -> IgnoresResult {
        let folder = try sharedFolder(at: directory)
        let root = folder.root
        let file = root + "/" + IgnorePatterns.fileName
        if let patterns {
            guard patterns.utf8.count <= IgnorePatterns.maxFileSize else {
                throw .invalidArgument("ignore patterns of \(patterns.utf8.count) bytes: at most \(IgnorePatterns.maxFileSize)")
            }
            // Not on `io`: a pull holds it until its batch ends (minutes, for a large file
            // from a slow member), and the patterns are in force for serving as soon as the
            // file is replaced (`ServedRules`); the scanner and the watcher take them on `io`.
            if let reason = Self.replaceIgnoreFile(in: root, with: patterns) {
                throw .io(path: file, reason: "cannot write the ignore patterns: \(reason)")
            }
            // The watcher filters with them from now on too (a file made right after this
            // returns is judged by them), and what the folder fetches that they now exclude
            // is no longer served (nor announced).
            let (selection, watcher) = folder.state.withLock { ($0.ignores.selection, $0.watcher) }
            var ignores = IgnorePatterns(patterns)
            ignores.selection = selection
            watcher?.updateIgnores(ignores)
            folder.heldRulesChanged()
            folder.io.async {
                folder.loadIgnores()
                folder.fullScan()
            }
            return IgnoresResult(folder: folder.id, path: root, patterns: patterns)
        }
        let text: String
        do {
            let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
            guard size <= IgnorePatterns.maxFileSize else {
                throw EngineError.invalidArgument("\(file) holds \(size) bytes: more than the \(IgnorePatterns.maxFileSize) read")
            }
            text = FileManager.default.fileExists(atPath: file) ? try String(contentsOfFile: file, encoding: .utf8) : ""
        } catch let error as EngineError {
            throw error
        } catch {
            throw .io(path: file, reason: "cannot read the ignore patterns: \(PlainText.reason(error))")
        }
        return IgnoresResult(folder: folder.id, path: root, patterns: text)
    }

    /// One replacement of an ignore file at a time (two commands at once would write the same temporary).
    private static let ignoreWrites = Mutex(())

    /// Replaces the ignore file at `root` with `patterns` (empty: removes it): written to a
    /// temporary name the scanner and the watcher skip, then renamed over it, so a scan
    /// meanwhile never sees a half-written file nor records the temporary. Nil, or why not.
    static func replaceIgnoreFile(in root: String, with patterns: String) -> String? {
        ignoreWrites.withLock { _ -> String? in
            guard let handle = try? DirectoryHandle(path: root) else { return "cannot open \(root)" }
            if patterns.isEmpty {
                return unlinkat(handle.fd, IgnorePatterns.fileName, 0) == 0 || errno == ENOENT ? nil : String(cString: strerror(errno))
            }
            let temp = FolderApplier.tempName(forPath: IgnorePatterns.fileName)
            let fd = openat(handle.fd, temp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
            guard fd >= 0 else { return String(cString: strerror(errno)) }
            var failure: String?
            Array(patterns.utf8).withUnsafeBytes { bytes in
                var done = 0
                while done < bytes.count, failure == nil {
                    let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
                    if n > 0 { done += n } else if n < 0 && errno != EINTR { failure = String(cString: strerror(errno)) }
                }
            }
            if failure == nil, fsync(fd) != 0 { failure = String(cString: strerror(errno)) }
            close(fd)
            if failure == nil, renameat(handle.fd, temp, handle.fd, IgnorePatterns.fileName) != 0 { failure = String(cString: strerror(errno)) }
            if failure != nil { unlinkat(handle.fd, temp, 0) }
            return failure
        }
    }
}
