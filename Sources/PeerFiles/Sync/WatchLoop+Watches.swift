internal import Glibc
internal import Synchronization

// The watches: one per directory of the tree, added, moved and removed as the tree changes.
extension WatchLoop {
    func addRoot(_ rootFd: Int32) throws(FileError) {
        let wd = addWatch(rootFd, path: "")
        guard wd >= 0 else {
            throw FileError.system("inotify_add_watch", path: root, errno: errno)
        }
        rootWd = wd
        watchTree(rootFd, path: "", report: false)
    }

    /// Adds a watch on the open directory `fd`; -1 (errno set) on failure.
    func addWatch(_ fd: Int32, path: String) -> Int32 {
        if let limit = watchLimit, directories.count >= limit, descriptors[PathKey(path)] == nil {
            errno = ENOSPC
            return noteFailure(path)
        }
        var wd = inotify_add_watch(inotify, "/proc/self/fd/\(fd)", Self.mask)
        if wd < 0 && errno == ENOENT {   // no /proc: by name, not following a final link
            wd = inotify_add_watch(inotify, path.isEmpty ? root : root + "/" + path, Self.mask | UInt32(IN_DONT_FOLLOW))
        }
        guard wd >= 0 else { return noteFailure(path) }
        if let old = directories[wd], !utf8Equal(old, path), descriptors[PathKey(old)] == wd { descriptors[PathKey(old)] = nil }
        directories[wd] = path
        descriptors[PathKey(path)] = wd
        owner?.shared.withLock { $0.watchCount = directories.count }
        return wd
    }

    private func noteFailure(_ path: String) -> Int32 {
        let code = errno
        if code == ENOSPC && !limitReported {
            limitReported = true
            owner?.shared.withLock { $0.degraded = true }
            flags.insert(.watchLimitReached(FolderWatcher.watchLimitMessage(root: root, watched: directories.count)))
            noteEvent()
        }
        errno = code
        return -1
    }

    /// Watches every directory below the open directory `fd` (at `path`), depth first,
    /// without following links; with `report`, every entry found is reported as changed
    /// (it appeared before its directory's watch was in place).
    func watchTree(_ fd: Int32, path: String, report: Bool) {
        var stack: [(fd: Int32, path: String)] = [(dup(fd), path)]
        let ignores = self.ignores
        while let (dirFd, dirPath) = stack.popLast() {
            guard dirFd >= 0 else { continue }
            defer { close(dirFd) }
            let copy = dup(dirFd)
            guard copy >= 0, let stream = fdopendir(copy) else {
                if copy >= 0 { close(copy) }
                continue
            }
            var subdirectories: [String] = []
            while let entry = readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
                }
                if name == "." || name == ".." { continue }
                var isDirectory = entry.pointee.d_type == UInt8(DT_DIR)
                if entry.pointee.d_type == UInt8(DT_UNKNOWN) {
                    var st = stat()
                    isDirectory = fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mode & S_IFMT == S_IFDIR
                }
                let child = dirPath.isEmpty ? name : dirPath + "/" + name
                if ignores.isIgnored(child, isDirectory: isDirectory) { continue }
                if report { noteChanged(child) }
                if isDirectory { subdirectories.append(name) }
            }
            closedir(stream)
            for name in subdirectories {
                let child = dirPath.isEmpty ? name : dirPath + "/" + name
                let sub = openat(dirFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard sub >= 0 else { continue }
                if addWatch(sub, path: child) < 0 && errno == ENOSPC {
                    close(sub)
                    continue
                }
                stack.append((sub, child))
            }
        }
    }

    /// Removes the watches of `path` and below.
    func unwatch(_ path: String) {
        let below = path + "/"
        for (wd, dir) in directories where utf8Equal(dir, path) || utf8HasPrefix(dir, below) {
            inotify_rm_watch(inotify, wd)
            directories[wd] = nil
            descriptors[PathKey(dir)] = nil
        }
        owner?.shared.withLock { $0.watchCount = directories.count }
    }

    /// A watched directory moved inside the tree: its watches keep working, under new paths.
    func rewatch(from old: String, to new: String) {
        let below = old + "/"
        for (wd, dir) in directories where utf8Equal(dir, old) || utf8HasPrefix(dir, below) {
            let moved = new + String(decoding: dir.utf8.dropFirst(old.utf8.count), as: UTF8.self)
            directories[wd] = moved
            if descriptors[PathKey(dir)] == wd { descriptors[PathKey(dir)] = nil }
            descriptors[PathKey(moved)] = wd
        }
    }

    /// Watches the new directory at `path` (and below).
    func watchNewDirectory(_ path: String, report: Bool) {
        guard let (parent, name) = openParent(path) else { return }
        defer { close(parent) }
        let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        if addWatch(fd, path: path) >= 0 { watchTree(fd, path: path, report: report) }
    }

    /// True when `path` is a directory now (not following a final link).
    func isDirectory(_ path: String) -> Bool {
        guard let (parent, name) = openParent(path) else { return false }
        defer { close(parent) }
        var st = stat()
        return fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }

    /// The parent directory of `path`, opened from the root one component at a time.
    func openParent(_ path: String) -> (Int32, String)? {
        var parts = path.split(separator: "/").map(String.init)
        guard let name = parts.popLast() else { return nil }
        var fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        for part in parts where fd >= 0 {
            let sub = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            close(fd)
            fd = sub
        }
        return fd >= 0 ? (fd, name) : nil
    }
}
