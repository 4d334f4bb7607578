internal import PeerModel
import Dispatch
import Glibc
import PeerFiles
import PeerIndex
import Synchronization

/// Files and directories this node has just put in place from a peer, each with what it
/// recorded for it.
///
/// The watcher reports every such placement as a change. When the disk still shows exactly
/// the recorded file (the same inode, size, mtime and permission bits: the scanner's own
/// test for "unchanged, not read"), a rescan would only read the index back to learn
/// nothing; `SharedFolder.watched` leaves such paths out. A directory made here is left out
/// while it is the same directory (inode) with the recorded permission bits: its mtime
/// changes with every file placed in it, and what changes inside it the watcher reports
/// path by path (what it held before its watch was added too), so a scan of the directory
/// would only walk every file placed in it again (D: 5,000 new directories). Anything else
/// about the path (a different inode, size, mtime or mode, another kind, gone, unreadable)
/// is scanned as before. A mark is used once: the first report of its path consumes it.
struct PlacedFiles {
    struct Mark: Equatable {
        var inode: UInt64
        var size: Int64
        var mtimeNs: Int64
        var mode: UInt32
        var isDirectory = false

        /// Whether `found` (what the disk shows now) is what this mark recorded: a file
        /// by all its fields, a directory by its inode and permission bits.
        func matches(_ found: Mark?) -> Bool {
            guard let found, found.isDirectory == isDirectory else { return false }
            return isDirectory ? found.inode == inode && found.mode == mode : found == self
        }
    }

    /// Marks kept at most; past that they are all dropped (their paths are simply scanned).
    static let limit = 100_000

    private(set) var marks: [String: Mark] = [:]
    let limit: Int

    init(limit: Int = PlacedFiles.limit) {
        self.limit = limit
    }

    var isEmpty: Bool { marks.isEmpty }

    /// Notes what was just recorded: a live file or directory with an inode is marked,
    /// anything else (a deletion, a link) clears its path's mark.
    mutating func note(_ records: [FileRecord]) {
        for record in records {
            if record.kind != .symlink, !record.deleted, let inode = record.inode {
                marks[record.path] = Mark(inode: inode, size: record.kind == .file ? record.size : 0, mtimeNs: record.mtimeNs,
                                          mode: record.mode, isDirectory: record.kind == .directory)
            } else {
                marks[record.path] = nil
            }
        }
        if marks.count > limit { marks.removeAll() }
    }

    /// Drops the marks of paths recorded some other way (a scan found them changed).
    mutating func forget(_ paths: some Sequence<String>) {
        guard !marks.isEmpty else { return }
        for path in paths { marks[path] = nil }
    }

    /// Drops every mark (their paths are simply scanned when reported).
    mutating func forgetAll() {
        marks = [:]
    }

    /// The marks of `paths`, moved out into a value of their own: the folder checks them
    /// against the disk (`take(_:stat:)`) outside its lock.
    mutating func takeMarks(of paths: some Sequence<String>) -> PlacedFiles {
        var taken = PlacedFiles(limit: limit)
        guard !marks.isEmpty else { return taken }
        for path in paths {
            if let mark = marks.removeValue(forKey: path) { taken.marks[path] = mark }
        }
        return taken
    }

    /// Whether `path` has a mark; `stat` is asked only then. Consumes the mark and says
    /// whether what `stat` found (nil: neither a regular file nor a directory, or not
    /// readable) is it (`Mark.matches`).
    mutating func take(_ path: String, stat: () -> Mark?) -> Bool {
        guard let mark = marks.removeValue(forKey: path) else { return false }
        return mark.matches(stat())
    }
}

extension SharedFolder {
    /// The paths of a watcher batch that need a scan: those the applier placed and that
    /// are still exactly what it recorded are left out (see `PlacedFiles`).
    func needingScan(_ paths: [String]) -> [String] {
        dispatchPrecondition(condition: .onQueue(io))
        var marks = state.withLock { $0.placed.takeMarks(of: paths) }
        guard !marks.isEmpty else { return paths }
        var root: DirectoryHandle?
        var parents = ParentHandles()   // (each directory opened once for the batch, not once per file)
        return paths.filter { path in
            !marks.take(path) {
                if root == nil { root = try? DirectoryHandle(path: self.root) }
                guard let root, let safe = try? SafePath(path), let resolved = try? parents.resolve(safe, under: root, lookingUp: false) else { return nil }
                var st = stat()
                guard fstatat(resolved.directory.fd, resolved.name, &st, AT_SYMLINK_NOFOLLOW) == 0,
                      st.st_mode & S_IFMT == S_IFREG || st.st_mode & S_IFMT == S_IFDIR else { return nil }
                let isDirectory = st.st_mode & S_IFMT == S_IFDIR
                return PlacedFiles.Mark(inode: UInt64(st.st_ino), size: isDirectory ? 0 : Int64(st.st_size),
                                        mtimeNs: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec),
                                        mode: UInt32(st.st_mode) & 0o7777, isDirectory: isDirectory)
            }
        }
    }
}
