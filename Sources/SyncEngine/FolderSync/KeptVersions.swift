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
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw .io(path: directory, reason: "cannot create the folder for kept versions (\(error.localizedDescription))")
        }
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
                return directory + "/" + name
            } catch {
                if error.kind == .alreadyExists { continue }
                guard error.errno == EXDEV else { throw .file(error) }
                return try Self.copyThenRemove(absolute, to: directory + "/" + name)
            }
        }
        throw .io(path: directory, reason: "cannot find a free name for the kept version")
    }

    /// Copies the file at `absolute` into the store (it stays where it is), as `keep` names
    /// it; where the copy went. For a version about to be replaced in place (`verify`).
    func keepCopy(_ absolute: String, folderID: String, relative: String, author: String, mtimeNs: Int64) throws(EngineError) -> String {
        let named = ConflictName.make(for: relative, stamp: ConflictRules.utcStamp(nanoseconds: mtimeNs), device: author)
        let target = URL(fileURLWithPath: root + "/" + Self.component(folderID) + "/" + named)
        let directory = target.deletingLastPathComponent().path
        let store: DirectoryHandle
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            store = try DirectoryHandle(path: directory)
        } catch {
            throw .io(path: directory, reason: "cannot create the folder for kept versions (\(error))")
        }
        let destination = directory + "/" + store.uniqueName(for: target.lastPathComponent)
        do { try FileManager.default.copyItem(atPath: absolute, toPath: destination) } catch {
            try? FileManager.default.removeItem(atPath: destination)
            throw .io(path: absolute, reason: "cannot copy it to \(destination) (\(error.localizedDescription))")
        }
        return destination
    }

    /// The move across file systems.
    private static func copyThenRemove(_ absolute: String, to destination: String) throws(EngineError) -> String {
        do { try FileManager.default.copyItem(atPath: absolute, toPath: destination) } catch {
            try? FileManager.default.removeItem(atPath: destination)
            throw .io(path: absolute, reason: "cannot copy it to \(destination) (\(error.localizedDescription))")
        }
        do { try FileManager.default.removeItem(atPath: absolute) } catch {
            throw .io(path: absolute, reason: "kept at \(destination) but cannot remove it (\(error.localizedDescription))")
        }
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
