internal import Glibc

extension DirectoryHandle {
    /// Creates a new, empty subdirectory for `name` right here and opens it: `name` if it is
    /// free, else `name (1)`, `name (2)`, … (never an existing entry, so nothing is merged
    /// into a folder that was there). `name` must be one safe component (`SafePath`
    /// rules: no `/`, not `.` or `..`, no control characters, at most 255 bytes): it is
    /// created with `mkdirat` relative to this handle and opened without following a
    /// link, so the new folder lies inside this directory whatever the name.
    package func makeNewSubdirectory(for name: String) throws -> (name: String, handle: DirectoryHandle) {
        let name = try SafePath.validateName(name)
        for _ in 0..<1_000 {
            let candidate = uniqueName(for: name)
            if mkdirat(fd, candidate, 0o755) == 0 {
                try sync()   // its name survives a power cut (`DurableNames`)
                return (candidate, try openSubdirectory(candidate))
            }
            let code = errno
            // Taken between the check and the mkdirat: try the next free name.
            guard code == EEXIST else {
                throw FileError.system("create directory", path: path + "/" + candidate, errno: code)
            }
        }
        throw FileError(kind: .alreadyExists, operation: "create directory", path: path + "/" + name,
                        message: "no free name for it")
    }
}
