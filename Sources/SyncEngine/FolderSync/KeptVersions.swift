#if canImport(Glibc)
internal import Glibc
#endif
internal import Foundation
internal import PeerFiles

/// Versions of files that resolving a conflict dropped, kept under the node's home until
/// the user deletes them: resolving never deletes a version. The layout is the folder's
/// tree, each version named as its conflict copy would be (its modification time in UTC
/// and the short ID of the device that wrote it):
///
///     HOME/versions/FOLDER-ID/dir/notes.sync-conflict-20261205-180102-ABCDEFG.txt
///
/// To recover one, copy it back into the folder (`cp`; it syncs as any edit). A later
/// versions store (issue 41) can take this tree as it is. Directories are created 0700:
/// the versions are the user's files, readable by the user only.
///
/// A version is kept durably before it leaves the folder for good: its new name (and every
/// directory made for it) is fsynced before the folder's directory, and a copy's bytes before
/// the original goes. Otherwise a power cut could keep the removal from the folder (whose
/// directory a pull fsyncs soon after) and lose the kept name, or bring the file back in the
/// folder where its recorded deletion has it taken away again: the version nowhere
/// (power-loss tests, conflicts and resolves).
struct KeptVersions {
    /// HOME/versions.
    let root: String

    /// Moves the entry at `absolute` (a file, link or directory in the folder whose ID is
    /// `folderID`, at `relative` in it) into the store, never replacing a kept version.
    /// Returns where it went. Across file systems it is copied, then removed.
    func keep(_ absolute: String, folderID: String, relative: String, author: String, mtimeNs: Int64) throws(EngineError) -> String {
        let named = ConflictName.make(for: relative, stamp: ConflictRules.utcStamp(nanoseconds: mtimeNs), device: author)
        let target = URL(fileURLWithPath: root + "/" + Self.component(folderID) + "/" + named)
        let directory = target.deletingLastPathComponent().path
        try makeDirectories(directory)
        let source = URL(fileURLWithPath: absolute)
        let store: DirectoryHandle, from: DirectoryHandle
        do {
            store = try DirectoryHandle(path: directory)
            from = try DirectoryHandle(path: source.deletingLastPathComponent().path)
        } catch { throw .file(error) }
        // A name taken meanwhile (the same version kept twice) gets a number.
        for _ in 0..<100 {
            let name = store.uniqueName(for: target.lastPathComponent)
            do {
                try from.move(source.lastPathComponent, to: store, as: name)
            } catch {
                if error.kind == .alreadyExists { continue }
                guard error.errno == EXDEV else { throw .file(error) }
                return try Self.copyThenRemove(absolute, to: directory + "/" + name)
            }
            // The kept name first, then the folder's loss of it.
            guard fsync(store.fd) == 0, fsync(from.fd) == 0 else {
                throw .io(path: directory + "/" + name, reason: "kept there, but cannot flush it to disk (\(String(cString: strerror(errno))))")
            }
            return directory + "/" + name
        }
        throw .io(path: directory, reason: "cannot find a free name for the kept version")
    }

    /// Copies the file at `absolute` into the store (it stays where it is), as `keep` names
    /// it; where the copy went. For a version about to be replaced in place (`verify`).
    func keepCopy(_ absolute: String, folderID: String, relative: String, author: String, mtimeNs: Int64) throws(EngineError) -> String {
        let named = ConflictName.make(for: relative, stamp: ConflictRules.utcStamp(nanoseconds: mtimeNs), device: author)
        let target = URL(fileURLWithPath: root + "/" + Self.component(folderID) + "/" + named)
        let directory = target.deletingLastPathComponent().path
        try makeDirectories(directory)
        let store: DirectoryHandle
        do { store = try DirectoryHandle(path: directory) } catch {
            throw .io(path: directory, reason: "cannot open the folder for kept versions (\(error))")
        }
        let destination = directory + "/" + store.uniqueName(for: target.lastPathComponent)
        try Self.copyDurably(absolute, to: destination)
        return destination
    }

    /// Creates `directory` (under `root`) and whatever is missing above it, each 0700, and
    /// fsyncs the directory above each one it made: a kept version's name lasts only if
    /// every directory on its way does.
    private func makeDirectories(_ directory: String) throws(EngineError) {
        var missing: [String] = []
        var probe = directory
        var info = stat()
        while stat(probe, &info) != 0, errno == ENOENT, probe.count > 1 {
            missing.append(probe)
            probe = (probe as NSString).deletingLastPathComponent
        }
        for made in missing.reversed() {
            guard mkdir(made, 0o700) == 0 || errno == EEXIST else {
                throw .io(path: made, reason: "cannot create the folder for kept versions (\(String(cString: strerror(errno))))")
            }
            DurableNames.syncDirectory((made as NSString).deletingLastPathComponent)
        }
        guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw .io(path: directory, reason: "cannot create the folder for kept versions (not a folder)")
        }
    }

    /// Copies `absolute` (a file, link or directory) to `destination` and makes the copy
    /// durable: every file and directory in it fsynced, then the directory holding it.
    private static func copyDurably(_ absolute: String, to destination: String) throws(EngineError) {
        do { try FileManager.default.copyItem(atPath: absolute, toPath: destination) } catch {
            try? FileManager.default.removeItem(atPath: destination)
            throw .io(path: absolute, reason: "cannot copy it to \(destination) (\(error.localizedDescription))")
        }
        var paths = [destination]
        if let walker = FileManager.default.enumerator(atPath: destination) {
            while let relative = walker.nextObject() as? String { paths.append(destination + "/" + relative) }
        }
        paths.append((destination as NSString).deletingLastPathComponent)
        for path in paths.reversed() {
            let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            if fd < 0, errno == ELOOP { continue }   // a link: its name is its parent's
            let synced = fd >= 0 && fsync(fd) == 0
            let code = errno
            if fd >= 0 { close(fd) }
            guard synced else {
                throw .io(path: destination, reason: "cannot flush the kept copy to disk (\(String(cString: strerror(code))))")
            }
        }
    }

    /// The move across file systems.
    private static func copyThenRemove(_ absolute: String, to destination: String) throws(EngineError) -> String {
        try copyDurably(absolute, to: destination)
        do { try FileManager.default.removeItem(atPath: absolute) } catch {
            throw .io(path: absolute, reason: "kept at \(destination) but cannot remove it (\(error.localizedDescription))")
        }
        DurableNames.syncDirectory((absolute as NSString).deletingLastPathComponent)
        return destination
    }

    /// A folder ID as one path component: IDs come from peers, so anything but letters,
    /// digits, "-" and "_" (a "/" or "..") is replaced by a tag of it.
    static func component(_ folderID: String) -> String {
        let plain = folderID.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
        }
        return plain && !folderID.isEmpty ? folderID : "id-" + NameTag.hex(of: Array(folderID.utf8), digits: 16)
    }
}
