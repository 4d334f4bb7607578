internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles

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
            let written: Result<Void, EngineError> = folder.io.sync {
                do {
                    if patterns.isEmpty {
                        if FileManager.default.fileExists(atPath: file) { try FileManager.default.removeItem(atPath: file) }
                    } else {
                        try Data(patterns.utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
                    }
                } catch {
                    return .failure(.io(path: file, reason: "cannot write the ignore patterns: \(PlainText.reason(error))"))
                }
                folder.loadIgnores()
                return .success(())
            }
            try written.get()
            // What it fetches that they now exclude is no longer served (nor announced).
            folder.heldRulesChanged()
            folder.io.async { folder.fullScan() }
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
}
