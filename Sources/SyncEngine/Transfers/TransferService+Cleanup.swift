#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles

/// Removing what a cancelled receive left behind (its partial files and chunk tree). A
/// removal that fails is never dropped: it is an error event saying what and why, and it is
/// tried again (`cleanupAttempts` times in all, `cleanupRetry` apart) before a last event
/// asks the user to remove it.
extension TransferService {
    /// Tries of one cleanup, the first included.
    static let cleanupAttempts = 5

    /// Removes the staged files of recorded transfer `id` in receive folder `directory`
    /// (a cancel after a restart: no partial file is open).
    func removeStaged(_ id: String, in directory: String, name: String) {
        let io = DispatchQueue(label: "syncpeer.cleanup")
        retryCleanup("the partial data of \(name) in \(directory)", on: io) { () throws(FileError) in
            try Self.removeStaged(id, in: directory, files: true)
        }
    }

    /// Removes transfer `id`'s chunk tree from the staging directory of receive folder
    /// `directory`, and with `files` its partial file. A folder or staging directory that is
    /// gone holds nothing to remove.
    static func removeStaged(_ id: String, in directory: String, files: Bool) throws(FileError) {
        guard FileManager.default.fileExists(atPath: directory) else { return }
        let target = try DirectoryHandle(path: directory)
        guard target.entryKind(PartialFile.stagingDirectoryName) != nil else { return }
        let staging = try target.openSubdirectory(PartialFile.stagingDirectoryName)
        if files { try staging.removeTree(id + PartialFile.fileExtension) }
        try staging.removeTree(id + ".tree")
    }

    /// Runs `body` on `queue`; when it throws, reports `what` and the cause and runs it
    /// again `cleanupRetry` later, up to `cleanupAttempts` tries.
    func retryCleanup(_ what: String, on queue: DispatchQueue, attempt: Int = 1,
                      _ body: @escaping @Sendable () throws(FileError) -> Void) {
        queue.async { [self] in
            do throws(FileError) { try body() } catch {
                let last = attempt >= Self.cleanupAttempts
                let next = last ? "giving up: remove it by hand"
                                : "trying again in \(cleanupRetry) (\(attempt) of \(Self.cleanupAttempts) tries)"
                emit(.error(.init(peer: nil, reason: "cannot remove \(what): \(error.description); \(next)", time: now())))
                guard !last else { return }
                queue.asyncAfter(deadline: .now() + .milliseconds(Int(cleanupRetry / .milliseconds(1)))) { [self] in
                    retryCleanup(what, on: queue, attempt: attempt + 1, body)
                }
            }
        }
    }
}
