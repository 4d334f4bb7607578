internal import Glibc

/// Whether a shared folder's root is still the directory that was shared: the check made
/// before every scan and every pull, so that a root that vanished or was replaced is never
/// scanned as "every file was deleted".
///
/// A root has two marks of identity, and both must hold:
/// - its device and inode (`RootIdentity`), recorded by the caller when the folder is
///   adopted: an unmounted disk leaves its mount point, another directory, behind;
/// - a marker file at its top, `.syncpeer-folder`, holding the folder ID (as Syncthing's
///   `.stfolder`): a folder moved away and re-created, or a backup restored in its place,
///   has no marker or another folder's. The marker is never synced (a built-in ignore).
///
///     observe(path) ──▶ RootObservation ──▶ judge(…, expected, liveEntries) ──▶ trusted
///                                                                           ├─▶ adopt (record it)
///                                                                           └─▶ refused(problem)
///
/// `observe` reads the disk; `judge` is pure (table-tested).
package enum FolderRoot {
    /// The marker file's name at the top of every shared folder.
    package static let markerName = ".syncpeer-folder"
    /// Largest marker read (a folder ID is a few bytes; anything longer is not ours).
    static let maxMarkerBytes = 4_096

    /// What is at `path` now: its identity, its marker, and whether it holds anything
    /// besides the marker and the node's own staging entries.
    package static func observe(_ path: String) -> Result<RootObservation, RootProblem> {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            switch code {
            case ENOENT: return .failure(.missing(path: path, reason: "it does not exist"))
            case ENOTDIR: return .failure(.missing(path: path, reason: "it is not a directory"))
            default: return .failure(.unreadable(path: path, message: String(cString: strerror(code))))
            }
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            return .failure(.unreadable(path: path, message: String(cString: strerror(errno))))
        }
        let identity = RootIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
        let marker: RootObservation.Marker
        switch readMarker(fd) {
        case .success(let text): marker = text.map { .folder($0) } ?? .absent
        case .failure(let error): return .failure(.unreadable(path: path, message: error.description))
        }
        guard let empty = isEmpty(fd) else {
            return .failure(.unreadable(path: path, message: String(cString: strerror(errno))))
        }
        return .success(RootObservation(identity: identity, marker: marker, isEmpty: empty))
    }

    /// What to do with a root as observed. `expected` is the identity recorded when the
    /// folder was adopted (nil for a folder from an older version, or one not started
    /// yet); `liveEntries` is what the index holds as present in the folder.
    ///
    /// Without a recorded identity the root is adopted when it cannot be a vanished one:
    /// it carries our marker, or it has content, or the index has nothing that an empty
    /// root could delete. An empty root without marker while the index holds entries looks
    /// exactly like an unmounted disk's mount point: refused, until the user confirms.
    package static func judge(_ observation: RootObservation, folderID: String, expected: RootIdentity?,
                             liveEntries: Int) -> RootVerdict {
        if case let .folder(other) = observation.marker, other != folderID {
            return .refused(.otherFolder(folderID: other))
        }
        guard let expected else {
            if observation.marker == .folder(folderID) || !observation.isEmpty || liveEntries == 0 { return .adopt }
            return .refused(.emptyNotAdopted(entries: liveEntries))
        }
        if observation.identity != expected {
            return .refused(.replaced(markerPresent: observation.marker != .absent, empty: observation.isEmpty))
        }
        if observation.marker == .absent { return .refused(.markerMissing(empty: observation.isEmpty)) }
        return .trusted
    }

    /// Writes the marker for `folderID` into the directory at `path` (replacing any other,
    /// atomically and durably) and returns the directory's identity.
    package static func adopt(_ path: String, folderID: String) throws(FileError) -> RootIdentity {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .system("open directory", path: path, errno: errno) }
        defer { close(fd) }
        let temporary = markerName + IgnorePatterns.temporarySuffix
        let file = openat(fd, temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard file >= 0 else { throw .system("create", path: path + "/" + temporary, errno: errno) }
        let bytes = Array((folderID + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
        let writeError = written == bytes.count ? 0 : (written < 0 ? errno : EIO)
        let syncError = writeError == 0 && fsync(file) != 0 ? errno : 0
        close(file)
        if writeError != 0 || syncError != 0 {
            unlinkat(fd, temporary, 0)
            throw .system(writeError != 0 ? "write" : "fsync", path: path + "/" + temporary, errno: writeError != 0 ? writeError : syncError)
        }
        guard renameat(fd, temporary, fd, markerName) == 0 else {
            let code = errno
            unlinkat(fd, temporary, 0)
            throw .system("rename", path: path + "/" + markerName, errno: code)
        }
        guard fsync(fd) == 0 else { throw .system("fsync", path: path, errno: errno) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .system("fstat", path: path, errno: errno) }
        return RootIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// The folder ID in the marker of the directory `fd`; nil when there is no marker.
    static func readMarker(_ fd: Int32) -> Result<String?, FileError> {
        let file = openat(fd, markerName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else {
            let code = errno
            return code == ENOENT ? .success(nil) : .failure(.system("open", path: markerName, errno: code))
        }
        defer { close(file) }
        var buffer = [UInt8](repeating: 0, count: maxMarkerBytes)
        let count = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
        guard count >= 0 else { return .failure(.system("read", path: markerName, errno: errno)) }
        var line = buffer[0..<count].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).first ?? []
        while line.last == UInt8(ascii: "\r") { line = line.dropLast() }   // written on another system
        return .success(String(decoding: line, as: UTF8.self).trimmingSpaces)
    }

    /// Whether the directory `fd` holds nothing but the marker and the node's own staging
    /// entries; nil when it cannot be listed.
    static func isEmpty(_ fd: Int32) -> Bool? {
        let copy = dup(fd)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return nil
        }
        defer { closedir(stream) }
        while true {
            errno = 0
            guard let entry = readdir(stream) else { return errno == 0 ? true : nil }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name == "." || name == ".." || IgnorePatterns.isBuiltInIgnored(name: Array(name.utf8)) { continue }
            return false
        }
    }
}

/// A folder root as found on disk.
package struct RootObservation: Sendable, Equatable {
    /// The marker file at the top of the root.
    package enum Marker: Sendable, Equatable {
        case absent
        /// A marker naming this folder ID (maybe another folder's).
        case folder(String)
    }

    package var identity: RootIdentity
    package var marker: Marker
    /// Nothing in it besides the marker and the node's own staging entries.
    package var isEmpty: Bool
}

/// What `FolderRoot.judge` decided.
package enum RootVerdict: Sendable, Equatable {
    /// The root is the adopted one: scan and sync.
    case trusted
    /// No identity was recorded yet and the root is plausible: write the marker, record the
    /// identity, then scan.
    case adopt
    /// Not the folder's root: nothing is scanned, deleted or pulled.
    case refused(RootProblem)
}

/// Why a folder root is not trusted. `description` says what was found, in one phrase.
package enum RootProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The root path does not exist or is not a directory.
    case missing(path: String, reason: String)
    /// The root (or its marker) cannot be read.
    case unreadable(path: String, message: String)
    /// Another directory is at the root path than the one adopted (device or inode differ).
    case replaced(markerPresent: Bool, empty: Bool)
    /// The adopted directory is there but its marker is gone.
    case markerMissing(empty: Bool)
    /// The marker names another folder.
    case otherFolder(folderID: String)
    /// No identity recorded yet, the root is empty and has no marker, and the index holds
    /// `entries` live entries: an unmounted disk looks like this.
    case emptyNotAdopted(entries: Int)

    package var description: String {
        switch self {
        case let .missing(path, reason):
            return "the folder root \(path) is missing (\(reason); an unmounted disk or a moved folder?)"
        case let .unreadable(path, message):
            return "the folder root \(path) cannot be read (\(message))"
        case let .replaced(markerPresent, empty):
            let what = empty ? "an empty directory (the mount point of an unmounted disk?)"
                : markerPresent ? "a copy of it (device or inode changed)" : "another directory (a moved or re-created folder?)"
            return "the folder root is not the directory that was shared: it is \(what)"
        case let .markerMissing(empty):
            return "the folder root lost its marker file \(FolderRoot.markerName)" + (empty ? " and is empty" : "")
        case let .otherFolder(folderID):
            return "the folder root belongs to another shared folder (its \(FolderRoot.markerName) names \(folderID))"
        case let .emptyNotAdopted(entries):
            return "the folder root is empty while \(entries) files and folders were synced (the mount point of an unmounted disk?)"
        }
    }
}
