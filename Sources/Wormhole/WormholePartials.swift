#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import PeerCrypto
internal import PeerFiles

/// Where a `resume-v1` receiver keeps what it verified: PeerFiles' partial files, beside the
/// target like every partial of ours (`<folder>/.syncpeer-partial/wormhole-ROOT.part`, the
/// directory 0700, the file 0600), named by the root of the sender's manifest so that the
/// same content sent again with a new code finds them. At most `WormholeResume.maxKeptPartials`
/// stay in one folder: opening a new one removes the oldest beyond that.
enum WormholePartials {
    static let prefix = "wormhole-"

    static func transferID(root: [UInt8]) -> String { prefix + hex(root) }

    /// The partial file of `root` in `directory`: the one a cut transfer left, or a new one.
    static func open(root: [UInt8], in directory: String) throws(WormholeError) -> PartialFile {
        do {
            let folder = try DirectoryHandle(path: directory)
            let id = transferID(root: root)
            if let existing = try PartialFile.existing(transferID: id, in: folder) { return existing }
            try prune(folder, keeping: WormholeResume.maxKeptPartials - 1)
            return try PartialFile(transferID: id, in: folder)
        } catch {
            throw .transfer("cannot keep a partial file in \(directory): \(error)")
        }
    }

    /// Removes the oldest wormhole partial files of `folder` until `keeping` are left.
    static func prune(_ folder: DirectoryHandle, keeping: Int) throws(FileError) {
        guard folder.entryKind(PartialFile.stagingDirectoryName) == .directory else { return }
        let staging = try folder.openSubdirectory(PartialFile.stagingDirectoryName)
        var found: [(name: String, mtime: Int)] = []
        for name in try staging.entryNames() where name.hasPrefix(prefix) && name.hasSuffix(PartialFile.fileExtension) {
            var info = stat()
            guard fstatat(staging.fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            found.append((name, info.st_mtim.tv_sec))
        }
        for old in found.sorted(by: { $0.mtime > $1.mtime }).dropFirst(keeping) {
            try staging.removeTree(old.name)
        }
    }

    /// After the partial file became the final one: its staging directory goes if empty.
    static func tidy(_ directory: String) {
        (try? DirectoryHandle(path: directory))?.removeIfEmpty(PartialFile.stagingDirectoryName)
    }
}
