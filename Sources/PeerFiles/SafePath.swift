internal import Glibc

/// Why a relative path received from a peer was refused. Each case names the rule.
package enum SafePathError: Error, Sendable, Equatable, CustomStringConvertible {
    case empty
    case absolute
    case pathTooLong(length: Int, limit: Int)
    case invalidUTF8(offset: Int)
    /// NUL or another control character (U+0000–U+001F, U+007F).
    case controlCharacter(byte: UInt8, offset: Int)
    case backslash(offset: Int)
    /// "a//b", a trailing "/".
    case emptyComponent(index: Int)
    /// A "." component.
    case currentDirectory(index: Int)
    /// A ".." component.
    case parentDirectory(index: Int)
    case componentTooLong(index: Int, length: Int, limit: Int)
    /// A "/" in what must be a single file name.
    case slashInName(offset: Int)

    package var description: String {
        switch self {
        case .empty:
            return "refused path: it is empty"
        case .absolute:
            return "refused path: it is absolute (starts with \"/\"); only paths relative to the folder are accepted"
        case let .pathTooLong(length, limit):
            return "refused path: \(length) bytes long, the limit is \(limit)"
        case let .invalidUTF8(offset):
            return "refused path: invalid UTF-8 at byte \(offset)"
        case let .controlCharacter(byte, offset):
            let name = byte == 0 ? "NUL" : "control character 0x" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            return "refused path: \(name) at byte \(offset) (control characters U+0000–U+001F and U+007F are not allowed)"
        case let .backslash(offset):
            return "refused path: backslash at byte \(offset) (not allowed: it is a separator on other systems)"
        case let .emptyComponent(index):
            return "refused path: component \(index + 1) is empty (\"//\" or a trailing \"/\")"
        case let .currentDirectory(index):
            return "refused path: component \(index + 1) is \".\""
        case let .parentDirectory(index):
            return "refused path: component \(index + 1) is \"..\" (it would leave the folder)"
        case let .componentTooLong(index, length, limit):
            return "refused path: component \(index + 1) is \(length) bytes long, the limit is \(limit)"
        case let .slashInName(offset):
            return "refused name: \"/\" at byte \(offset) (a file name is a single component)"
        }
    }
}

/// A relative path received from a peer, validated: hostile input never reaches the file
/// system unchecked. Rules, checked in this order:
///
/// 1. at most `maxPathBytes` (4,096) bytes of UTF-8;
/// 2. not empty;
/// 3. valid UTF-8 (when given as bytes);
/// 4. not absolute (no leading "/");
/// 5. no control characters (U+0000–U+001F, U+007F; NUL included) and no backslash;
/// 6. components separated by "/" are non-empty, not "." or "..", and at most
///    `maxComponentBytes` (255) bytes each.
///
/// Unicode is kept as sent (no normalization).
package struct SafePath: Sendable, Hashable, CustomStringConvertible {
    package static let maxPathBytes = 4_096
    package static let maxComponentBytes = 255

    /// The components, e.g. ["photos", "2024", "a.jpg"].
    package let components: [String]

    /// Validates a path given as a string.
    package init(_ path: String) throws(SafePathError) {
        try self.init(validatedBytes: Array(path.utf8), checkUTF8: false)
    }

    /// Validates a path given as raw bytes (e.g. straight from a frame).
    package init(bytes: some Collection<UInt8>) throws(SafePathError) {
        try self.init(validatedBytes: Array(bytes), checkUTF8: true)
    }

    /// Validates one file name (a single component: no "/").
    package static func validateName(_ name: String) throws(SafePathError) -> String {
        let path = try SafePath(name)
        guard path.components.count == 1 else {
            throw .slashInName(offset: name.utf8.firstIndex(of: UInt8(ascii: "/")).map { name.utf8.distance(from: name.utf8.startIndex, to: $0) } ?? 0)
        }
        return name
    }

    private init(validatedBytes bytes: [UInt8], checkUTF8: Bool) throws(SafePathError) {
        guard bytes.count <= Self.maxPathBytes else { throw .pathTooLong(length: bytes.count, limit: Self.maxPathBytes) }
        guard !bytes.isEmpty else { throw .empty }
        if checkUTF8, let offset = Self.firstInvalidUTF8(bytes) { throw .invalidUTF8(offset: offset) }
        guard bytes[0] != UInt8(ascii: "/") else { throw .absolute }
        for (offset, b) in bytes.enumerated() {
            if b < 0x20 || b == 0x7F { throw .controlCharacter(byte: b, offset: offset) }
            if b == UInt8(ascii: "\\") { throw .backslash(offset: offset) }
        }
        let parts = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        var components: [String] = []
        components.reserveCapacity(parts.count)
        for (index, part) in parts.enumerated() {
            if part.isEmpty { throw .emptyComponent(index: index) }
            if part.elementsEqual([UInt8(ascii: ".")]) { throw .currentDirectory(index: index) }
            if part.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) { throw .parentDirectory(index: index) }
            if part.count > Self.maxComponentBytes {
                throw .componentTooLong(index: index, length: part.count, limit: Self.maxComponentBytes)
            }
            components.append(String(decoding: part, as: UTF8.self))
        }
        self.components = components
    }

    /// The path with "/" separators.
    package var string: String { components.joined(separator: "/") }
    /// The last component (the file name).
    package var name: String { components[components.count - 1] }
    package var description: String { string }

    /// Offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no
    /// overlong forms, no surrogates, nothing above U+10FFFF), or nil.
    static func firstInvalidUTF8(_ b: [UInt8]) -> Int? {
        var i = 0
        let n = b.count
        while i < n {
            let c = b[i]
            if c < 0x80 { i += 1; continue }
            let length: Int
            var lower: UInt8 = 0x80, upper: UInt8 = 0xBF   // range of the second byte
            switch c {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; upper = 0x9F
            case 0xF0: length = 4; lower = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; upper = 0x8F
            default: return i
            }
            guard i + length <= n else { return i }
            guard b[i + 1] >= lower && b[i + 1] <= upper else { return i }
            for k in 2..<length where b[i + k] & 0xC0 != 0x80 { return i }
            i += length
        }
        return nil
    }
}

/// An open directory, used as the anchor for every operation below a sync folder
/// (`openat`, `mkdirat`, `renameat2`, …) so that paths are never re-resolved from a string.
/// Closed when the last reference goes away.
package final class DirectoryHandle: Sendable {
    /// The file descriptor (O_DIRECTORY). Valid as long as the handle lives.
    package let fd: Int32
    /// The path it was opened as, for messages.
    package let path: String

    /// Opens a directory the user chose (a sync folder, a download directory). Symbolic
    /// links in *this* path are followed: it is the user's own choice, not a peer's.
    package init(path: String) throws(FileError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError.system("open directory", path: path, errno: errno) }
        self.fd = fd
        self.path = path
    }

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// What is at `name` in this directory, without following a symbolic link.
    package func entryKind(_ name: String) -> EntryKind? {
        var st = stat()
        guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return EntryKind(mode: st.st_mode)
    }

    /// Opens the subdirectory `name` (a single component) without following a symbolic
    /// link; with `create`, makes it first (mode 0755 before umask) if it is missing.
    package func openSubdirectory(_ name: String, create: Bool = false) throws(FileError) -> DirectoryHandle {
        let child = path.hasSuffix("/") ? path + name : path + "/" + name
        if create {
            if mkdirat(fd, name, 0o755) == 0 {
                try sync()   // its name survives a power cut (`DurableNames`)
            } else if errno != EEXIST {
                throw FileError.system("create directory", path: child, errno: errno)
            }
        }
        let sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard sub >= 0 else {
            let code = errno
            if code == ELOOP || code == ENOTDIR {
                if entryKind(name) == .symlink {
                    throw FileError(kind: .symlinkRefused, operation: "open directory", path: child, errno: code,
                                    message: "it is a symbolic link; links inside a synced folder are never followed")
                }
                throw FileError(kind: .notADirectory, operation: "open directory", path: child, errno: code,
                                message: "it exists and is not a directory")
            }
            throw FileError.system("open directory", path: child, errno: code)
        }
        return DirectoryHandle(fd: sub, path: child)
    }

    /// fsync of the directory (makes renames and creations in it durable).
    package func sync() throws(FileError) {
        guard fsync(fd) == 0 else { throw FileError.system("fsync directory", path: path, errno: errno) }
    }

    /// `name (1).ext`, `name (2).ext`, … : the first variant of `name` that does not
    /// exist in this directory (see `SafePath.uniqueName(for:isTaken:)`). Another process
    /// may create it right after: commit with a no-replace rename, and retry on a clash.
    package func uniqueName(for name: String) -> String {
        SafePath.uniqueName(for: name) { entryKind($0) != nil }
    }
}

/// Kind of a directory entry, as `lstat` sees it.
package enum EntryKind: Sendable, Equatable {
    case file, directory, symlink, other

    init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .file
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symlink
        default: self = .other
        }
    }
}

/// A validated relative path resolved under a root: its parent directory is open
/// (reached one component at a time without following any symbolic link), and `name`
/// is the last component, to be opened or created relative to `directory`.
package struct ResolvedPath: Sendable {
    package let directory: DirectoryHandle
    package let name: String
    package let relative: SafePath
    /// What already exists at `name` (not following a link), nil if nothing.
    package let existing: EntryKind?
    /// Root path + relative path, for messages only (never re-opened by path).
    package var displayPath: String { directory.path + "/" + name }
}

extension SafePath {
    /// Resolves this path under `root`: each directory component is opened with
    /// `openat(O_NOFOLLOW | O_DIRECTORY)`, so a symbolic link anywhere in the tree can
    /// never lead outside the root (a link component is refused with `.symlinkRefused`).
    /// With `createDirectories`, missing directories are made (mode 0755 before umask).
    package func resolve(under root: DirectoryHandle, createDirectories: Bool = false) throws(FileError) -> ResolvedPath {
        var directory = root
        for component in components.dropLast() {
            directory = try directory.openSubdirectory(component, create: createDirectories)
        }
        return ResolvedPath(directory: directory, name: name, relative: self, existing: directory.entryKind(name))
    }

    /// Validates `relative` (a `SafePathError` if hostile) and resolves it under `root`
    /// (a `FileError` if a component is a link, not a directory, or missing).
    package static func resolve(relative: String, under root: DirectoryHandle,
                               createDirectories: Bool = false) throws -> ResolvedPath {
        try SafePath(relative).resolve(under: root, createDirectories: createDirectories)
    }

    /// The first of `name (1).ext`, `name (2).ext`, … for which `isTaken` is false, or
    /// `name` itself if it is free. Never an existing name: files are never overwritten.
    ///
    /// The extension is what follows the last "." unless that dot is the first character
    /// (dotfiles: `.bashrc` → `.bashrc (1)`) or the last one (`notes.` → `notes. (1)`):
    /// `report.pdf` → `report (1).pdf`, `archive.tar.gz` → `archive.tar (1).gz`,
    /// `.config.bak` → `.config (1).bak`, `Makefile` → `Makefile (1)`. When the result
    /// would exceed 255 bytes, the stem is shortened (on a character boundary).
    package static func uniqueName(for name: String, isTaken: (String) -> Bool) -> String {
        if !isTaken(name) { return name }
        var n = 1
        while true {
            let candidate = numberedName(name, n)
            if !isTaken(candidate) { return candidate }
            n += 1
        }
    }

    /// `name` with " (n)" before its extension (see `uniqueName`).
    package static func numberedName(_ name: String, _ n: Int) -> String {
        var stem = Substring(name)
        var ext = Substring("")
        if let dot = name.lastIndex(of: "."), dot != name.startIndex, name.index(after: dot) != name.endIndex {
            stem = name[..<dot]
            ext = name[dot...]
        }
        let suffix = " (\(n))"
        while stem.utf8.count + suffix.utf8.count + ext.utf8.count > maxComponentBytes && !stem.isEmpty {
            stem = stem.dropLast()
        }
        return stem + suffix + ext
    }
}
