import Foundation
import Glibc
import PeerCrypto
import PeerFiles

/// What the chaos test's "users" did to the files, and which versions must therefore survive.
///
/// ## Which versions "anyone wrote"
///
/// Every file content the test writes is unique (it starts with the seed and the op number),
/// so a content hash names one version. A version is *written* when a user op puts it on a
/// node's disk (create, edit, append). It is *superseded* when a user op on any node removes
/// or replaces a file that held exactly that content at that instant: the user saw that
/// version and chose to replace it (an edit, a delete, deleting its directory, replacing it by
/// another kind). That covers "overwritten by a later edit on the same node before it could
/// sync" as well as "edited on another node after it arrived there".
///
/// Every written version that was not superseded must exist at the end, as the current file or
/// a conflict copy (anywhere in the tree: renames move versions). Two edits of the same file on
/// two nodes that did not see each other's version are both required, whatever the order.
///
/// What a user op replaced is known exactly, not guessed from an earlier read: replacing ops
/// move the old entry out of the folder atomically (`rename` to a scratch directory, or
/// `renameat2(RENAME_EXCHANGE)` for an edit) and hash what they got. The one op that cannot
/// do that, an append in place, checks after writing that the file it wrote is still the one
/// at the path (if the daemon replaced it meanwhile, the append went nowhere and counts for
/// nothing). The remaining window, a daemon replacing the file after that check with a
/// version it had decided on before the append, is the product's race, not the test's.
struct ChaosLedger {
    struct Version {
        let op: Int
        let node: String
        let path: String
    }

    /// Content hash → who wrote it first.
    private(set) var written: [String: Version] = [:]
    /// Content hash → the op that replaced or removed it.
    private(set) var superseded: [String: Int] = [:]

    mutating func wrote(_ hash: String, node: String, path: String, op: Int) {
        if written[hash] == nil { written[hash] = Version(op: op, node: node, path: path) }
    }

    mutating func replaced(_ hashes: [String], op: Int) {
        for hash in hashes where superseded[hash] == nil { superseded[hash] = op }
    }

    /// The versions that must be somewhere in the final tree.
    var required: [String: Version] { written.filter { superseded[$0.key] == nil } }
}

/// One node's folder as the chaos "user" sees it, with the file operations that record
/// exactly what they replaced.
struct ChaosFolder {
    let node: String
    let root: String
    /// Outside every folder, on the same file system (renames into it are atomic).
    let scratch: String

    /// Relative path → "file", "dir" or "link" for what is there now (daemon temporary
    /// files, the staging directory and the folder's root marker excluded: users do not
    /// touch them).
    func entries() -> [String: String] {
        var out: [String: String] = [:]
        guard let walker = FileManager.default.enumerator(atPath: root) else { return out }
        while let relative = walker.nextObject() as? String {
            let name = (relative as NSString).lastPathComponent
            if name.hasSuffix(IgnorePatterns.temporarySuffix) || name == IgnorePatterns.stagingDirectoryName {
                if name == IgnorePatterns.stagingDirectoryName { walker.skipDescendants() }
                continue
            }
            if relative == FolderRoot.markerName { continue }   // the daemon's own marker, never synced
            var st = stat()
            guard lstat(root + "/" + relative, &st) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR: out[relative] = "dir"
            case S_IFLNK: out[relative] = "link"
            case S_IFREG: out[relative] = "file"
            default: break
            }
        }
        return out
    }

    private func full(_ relative: String) -> String { relative.isEmpty ? root : root + "/" + relative }

    private func scratchPath() -> String { scratch + "/" + UUID().uuidString }

    /// Moves `relative` out of the folder in one step; returns the hashes of every file it
    /// held (nil: nothing was there).
    func remove(_ relative: String) -> [String]? {
        let out = scratchPath()
        guard rename(full(relative), out) == 0 else { return nil }
        defer { try? FileManager.default.removeItem(atPath: out) }
        return ChaosFolder.fileHashes(out)
    }

    /// Puts `content` at `relative`: a new file, or (if something is there) in its place in
    /// one atomic exchange. Returns what it replaced (empty for a new file), nil on failure.
    func write(_ relative: String, _ content: [UInt8]) -> [String]? {
        let staged = scratchPath()
        guard FileManager.default.createFile(atPath: staged, contents: Data(content)) else { return nil }
        chmod(staged, 0o644)
        return place(staged, at: relative)
    }

    /// Makes `relative` a symbolic link to `target` (in place of what is there, atomically).
    func link(_ relative: String, to target: String) -> [String]? {
        let staged = scratchPath()
        guard symlink(target, staged) == 0 else { return nil }
        return place(staged, at: relative)
    }

    private func place(_ staged: String, at relative: String) -> [String]? {
        if ChaosFolder.renameat2(staged, full(relative), ChaosFolder.noReplace) == 0 { return [] }
        if errno == EEXIST, ChaosFolder.renameat2(staged, full(relative), ChaosFolder.exchange) == 0 {
            defer { try? FileManager.default.removeItem(atPath: staged) }
            return ChaosFolder.fileHashes(staged)
        }
        try? FileManager.default.removeItem(atPath: staged)
        return nil
    }

    /// Appends to the file at `relative` in place. Returns (old hash, new hash), or nil when
    /// there was no regular file or the daemon replaced it while we wrote (then the append is
    /// lost with the replaced file, and counts for nothing).
    func append(_ relative: String, _ extra: [UInt8]) -> (old: String, new: String)? {
        let fd = open(full(relative), O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var before = stat()
        guard fstat(fd, &before) == 0, before.st_mode & S_IFMT == S_IFREG else { return nil }
        var content: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 { return nil }
            if count == 0 { break }
            content += buffer[0..<count]
        }
        guard extra.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) == extra.count else { return nil }
        var after = stat(), atPath = stat()
        guard fstat(fd, &after) == 0, after.st_nlink > 0, lstat(full(relative), &atPath) == 0,
              atPath.st_ino == after.st_ino, atPath.st_dev == after.st_dev else { return nil }
        return (ChaosFolder.hash(content), ChaosFolder.hash(content + extra))
    }

    /// Renames without replacing anything (the destination must not exist).
    func move(_ from: String, to: String) -> Bool {
        ChaosFolder.renameat2(full(from), full(to), ChaosFolder.noReplace) == 0
    }

    func makeDirectory(_ relative: String) -> Bool {
        mkdir(full(relative), 0o755) == 0
    }

    // MARK: - Helpers

    static func hash(_ bytes: [UInt8]) -> String {
        BLAKE2b.hash(bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// Hashes of every regular file at or below `path` (not following links; the daemon's
    /// temporary and staged files are not versions anyone saw).
    static func fileHashes(_ path: String) -> [String] {
        let name = (path as NSString).lastPathComponent
        if name.hasSuffix(IgnorePatterns.temporarySuffix) || name == IgnorePatterns.stagingDirectoryName
            || name == FolderRoot.markerName { return [] }
        var st = stat()
        guard lstat(path, &st) == 0 else { return [] }
        switch st.st_mode & S_IFMT {
        case S_IFREG:
            return (try? TestFiles.hash(path)).map { [$0] } ?? []
        case S_IFDIR:
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            return names.flatMap { fileHashes(path + "/" + $0) }
        default:
            return []
        }
    }

    static let noReplace: UInt32 = 1 << 0   // RENAME_NOREPLACE
    static let exchange: UInt32 = 1 << 1    // RENAME_EXCHANGE

    /// `renameat2(2)`, looked up at run time (the Glibc module does not export it).
    static func renameat2(_ from: String, _ to: String, _ flags: UInt32) -> Int32 {
        renameat2Function(AT_FDCWD, from, AT_FDCWD, to, flags)
    }

    private typealias Renameat2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    private static let renameat2Function: Renameat2 = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "renameat2") else { fatalError("renameat2 is not in this libc") }
        return unsafeBitCast(symbol, to: Renameat2.self)
    }()
}
