#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import FoundationEssentials
internal import Dispatch
internal import PeerFiles
internal import PeerIndex

/// Before the versions store held every kept version, `resolve`, `confirm`, `revert` and the
/// recovery after a power cut moved whole copies to HOME/versions/FOLDER-ID/, in the folder's
/// tree, each named as its conflict copy would be (time in UTC, short ID of its author, and
/// " (N)" when the name was taken):
///
///     HOME/versions/FOLDER-ID/dir/notes.sync-conflict-20261205-180102-ABCDEFG (1).txt
///
/// Those were invisible to `history` and `restore`, outside the policy and the size cap. At
/// every start (so once in effect: what is taken in leaves that tree) each file there goes
/// into the store as a version of the path it was kept for (reason `imported`, kept now: the
/// policy's clock starts at the import, so none expires at once), then is removed, and the
/// directories it empties go too. What cannot go in stays where it is and is reported: a
/// folder whose policy is `none`, a file the store cannot take whole, a link, the tree of a
/// folder no longer shared here.
enum KeptFolderImport {
    static let reason = "imported"

    /// The folder ID as the old keeper named its directory: itself when it is a plain name
    /// (letters, digits, "-", "_"), else "id-" and a tag of it (IDs came from peers).
    static func component(_ folderID: String) -> String {
        let plain = folderID.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
        }
        return plain && !folderID.isEmpty ? folderID : "id-" + NameTag.hex(of: Array(folderID.utf8), digits: 16)
    }

    /// The path a kept file had in its folder, from its path in the old tree: each component
    /// named as a conflict copy loses its marker, time and device (and " (N)"), and the
    /// deepest one's device is its author (a kept directory's for the files in it). A path with no such name is taken as it is. Pure.
    static func original(of kept: String) -> (path: String, device: String?) {
        var device: String?
        let parts = kept.split(separator: "/", omittingEmptySubsequences: true).map { part -> String in
            let name = unnumbered(String(part))
            guard let parsed = ConflictName.parse(name) else { return String(part) }
            device = parsed.device
            return parsed.original
        }
        return (parts.joined(separator: "/"), device)
    }

    /// `name` without the " (N)" `SafePath.numberedName` puts before its extension.
    static func unnumbered(_ name: String) -> String {
        var stem = Substring(name)
        var ext = Substring("")
        if let dot = name.lastIndex(of: "."), dot != name.startIndex, name.index(after: dot) != name.endIndex {
            stem = name[..<dot]
            ext = name[dot...]
        }
        guard stem.hasSuffix(")"), let open = stem.ranges(of: " (").last else { return name }
        let digits = stem[open.upperBound..<stem.index(before: stem.endIndex)]
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return name }
        return String(stem[..<open.lowerBound] + ext)
    }
}

extension FolderService {
    /// Takes the old kept tree of every shared folder under `versionsDirectory` into the
    /// versions store (`KeptFolderImport`), on the expiry queue (never the node's). Returns at
    /// once; `done` (tests) is called when it is over.
    func importKeptFolders(versionsDirectory: String, done: (@Sendable () -> Void)? = nil) {
        Self.expiryQueue.async { [weak self] in
            self?.importKeptFoldersNow(versionsDirectory: versionsDirectory)
            done?()
        }
    }

    private func importKeptFoldersNow(versionsDirectory: String) {
        guard let keeper = versions,
              let names = try? FileManager.default.contentsOfDirectory(atPath: versionsDirectory) else { return }
        let folders = sharedFolders()
        for name in names where !name.hasPrefix(".") {
            guard let folder = folders.first(where: { KeptFolderImport.component($0.id) == name }) else { continue }
            let directory = versionsDirectory + "/" + name
            let (taken, left) = Self.importKept(directory, folder: folder, keeper: keeper)
            guard taken + left > 0 else { continue }
            folder.report("\(taken) version(s) kept in \(directory) before the versions store are in it now "
                + "('syncpeer history \(folder.root)')"
                + (left > 0 ? "; \(left) could not be taken in and stay there" : ""))
        }
    }

    /// Takes in every regular file under `directory` (one folder's old tree); removes each one
    /// taken and the directories emptied. Returns how many went in and how many stay.
    private static func importKept(_ directory: String, folder: SharedFolder, keeper: VersionKeeper) -> (taken: Int, left: Int) {
        guard let relatives = try? FileManager.default.subpathsOfDirectory(atPath: directory) else { return (0, 0) }
        var (taken, left) = (0, 0)
        var directories = [directory]
        for relative in relatives {
            let absolute = directory + "/" + relative
            var info = stat()
            guard lstat(absolute, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                directories.append(absolute)
                continue
            case S_IFREG:
                break
            default:
                left += 1
                continue
            }
            let (path, device) = KeptFolderImport.original(of: relative)
            let record = FileRecord(folderID: folder.id, FileEntry(path: path, kind: .file, size: Int64(info.st_size),
                                    mtimeNs: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                                    mode: UInt32(info.st_mode & 0o7777), version: [:], modifiedBy: device ?? ""))
            guard keeper.keepFile(at: absolute, as: record, reason: KeptFolderImport.reason, whole: true) != nil,
                  unlink(absolute) == 0 else {
                left += 1
                continue
            }
            taken += 1
        }
        // Deepest first: a directory emptied of its files, then the one above it.
        for emptied in directories.sorted(by: { $0.utf8.count > $1.utf8.count }) { rmdir(emptied) }
        if taken > 0 { DurableNames.syncDirectory(PathName.deletingLastComponent(directory)) }
        return (taken, left)
    }
}
