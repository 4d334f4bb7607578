#if canImport(Glibc)
internal import Glibc
#endif

extension DirectoryHandle {
    /// Moves the entry `name` (a file or a whole directory) to `destination/newName`,
    /// never replacing anything there: a received folder appears at once, complete, or not
    /// at all. Throws `.alreadyExists` when `newName` is taken.
    package func move(_ name: String, to destination: DirectoryHandle, as newName: String) throws(FileError) {
        if entryKind(name) != .directory {
            try PartialFile.renameNoReplace(from: self, name, to: destination, newName)
            return
        }
        // Directories cannot be hard-linked, so the link+unlink fallback does not apply:
        // renameat2(RENAME_NOREPLACE) where it works, else check-then-rename.
        if let renameat2 = PartialFile.renameat2Function {
            if renameat2(fd, name, destination.fd, newName, 1) == 0 { return }
            let code = errno
            guard Self.flagsUnsupported(code) else {
                throw FileError.system("rename", path: destination.path + "/" + newName, errno: code)
            }
        }
        guard destination.entryKind(newName) == nil else {
            throw FileError(kind: .alreadyExists, operation: "rename", path: destination.path + "/" + newName,
                            message: "it already exists")
        }
        guard renameat(fd, name, destination.fd, newName) == 0 else {
            throw FileError.system("rename", path: destination.path + "/" + newName, errno: errno)
        }
    }

    /// Removes `name` and, if it is a directory, everything below it, without following
    /// symbolic links (a link is removed, never its target). Missing entries are fine.
    package func removeTree(_ name: String) throws(FileError) {
        switch entryKind(name) {
        case nil:
            return
        case .directory:
            let child = try openSubdirectory(name)
            for entry in try child.entryNames() { try child.removeTree(entry) }
            guard unlinkat(fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT else {
                throw FileError.system("remove directory", path: path + "/" + name, errno: errno)
            }
        default:
            guard unlinkat(fd, name, 0) == 0 || errno == ENOENT else {
                throw FileError.system("remove", path: path + "/" + name, errno: errno)
            }
        }
    }

    /// Removes the directory `name` if it is empty; returns whether it did.
    @discardableResult
    package func removeIfEmpty(_ name: String) -> Bool {
        unlinkat(fd, name, AT_REMOVEDIR) == 0
    }

    /// The names in this directory (without "." and "..").
    package func entryNames() throws(FileError) -> [String] {
        let copy = dup(fd)
        guard copy >= 0, let stream = fdopendir(copy) else {
            throw FileError.system("read directory", path: path, errno: errno)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
