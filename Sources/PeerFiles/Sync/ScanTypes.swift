internal import Glibc
package import PeerModel

/// One entry of a folder as the disk shows it: what the scanner found, and what the caller
/// (the index) knows from the last scan, which a rescan compares with. An observation of
/// the disk, not a `FileEntry` (no version, author or sequence: those are given when the
/// index records it; the inode and chunk list that only the local side has), with the
/// entry's kind and its fields' names and types.
package struct ScannedEntry: Sendable, Equatable, CustomStringConvertible {
    /// Relative to the folder root, "/"-separated, no leading "/" (valid as a `SafePath`).
    package var path: String
    package var kind: FileKind
    /// Bytes for files, the target's length for symlinks, 0 for directories.
    package var size: Int64
    /// Modification time in nanoseconds since 1970 (UTC).
    package var mtimeNs: Int64
    /// Permission bits (`st_mode & 0o7777`).
    package var mode: UInt32
    package var inode: UInt64
    /// The link's target as stored (never followed), for symlinks.
    package var symlinkTarget: String?
    /// The chunk list, for files: fresh when the content was read, reused from the known
    /// entry (the caller's) when size, mtime and inode were unchanged. In a known entry, nil
    /// means "unknown": the file is read again whenever it has to be reported.
    package var manifest: Manifest?

    package init(path: String, kind: FileKind, size: Int64, mtimeNs: Int64, mode: UInt32, inode: UInt64,
                symlinkTarget: String? = nil, manifest: Manifest? = nil) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtimeNs = mtimeNs
        self.mode = mode
        self.inode = inode
        self.symlinkTarget = symlinkTarget
        self.manifest = manifest
    }

    package var description: String {
        let mode = String(self.mode, radix: 8)
        switch kind {
        case .file: return "\(path) file \(size) B mode \(mode)"
        case .directory: return "\(path)/ mode \(mode)"
        case .symlink: return "\(path) -> \(symlinkTarget ?? "?")"
        }
    }
}

/// Where the scanner gets what the caller knows. Storage-agnostic: an SQLite index
/// answers with `SELECT … WHERE path = ?1 OR (path >= ?1 || '/' AND path < ?1 || '0')
/// ORDER BY path` (BINARY collation is the required order); tests use `KnownEntryList`.
package protocol KnownEntrySource {
    /// The known entries at `prefix` and below it (`prefix` itself and every path that
    /// starts with `prefix + "/"`; all of them when `prefix` is ""), in ascending order of
    /// their UTF-8 bytes (`memcmp` order, *not* Swift's `String` order). The scanner
    /// merges them with its walk (which visits paths in the same order) and so never holds
    /// the known set in memory; it throws `ScanError.knownEntriesOutOfOrder` if the order
    /// is wrong.
    func knownEntries(under prefix: String) -> any IteratorProtocol<ScannedEntry>

    /// What was known about the file now at `path` before it was renamed there (the kernel
    /// reported the rename), if it is still that file (same inode, size and mtime): the
    /// scanner takes its manifest instead of reading the file.
    func movedFile(path: String, inode: UInt64, size: Int64, mtimeNs: Int64) -> ScannedEntry?
}

extension KnownEntrySource {
    package func movedFile(path: String, inode: UInt64, size: Int64, mtimeNs: Int64) -> ScannedEntry? { nil }
}

/// An in-memory `KnownEntrySource` (tests, small folders): a dictionary by path.
package struct KnownEntryList: KnownEntrySource, Sendable {
    package private(set) var entries: [String: ScannedEntry] = [:]

    package init() {}
    package init(_ entries: [ScannedEntry]) {
        for e in entries { self.entries[e.path] = e }
    }

    package subscript(path: String) -> ScannedEntry? { entries[path] }
    package var count: Int { entries.count }

    /// Records a batch as a caller would: added and changed entries replace what was
    /// known, deleted paths are forgotten.
    package mutating func apply(_ batch: ScanBatch) {
        for e in batch.added { entries[e.path] = e }
        for e in batch.changed { entries[e.path] = e }
        for p in batch.deleted { entries[p] = nil }
    }

    package func knownEntries(under prefix: String) -> any IteratorProtocol<ScannedEntry> {
        let selected: [ScannedEntry]
        if prefix.isEmpty {
            selected = Array(entries.values)
        } else {
            let below = prefix + "/"
            selected = entries.values.filter { $0.path == prefix || $0.path.hasPrefix(below) }
        }
        return selected.sorted { utf8Less($0.path, $1.path) }.makeIterator()
    }
}

/// Something the scanner could not do for one path; the path is neither reported as
/// changed nor as deleted (what the caller knows about it stays as it is).
package struct ScanProblem: Sendable, Equatable, CustomStringConvertible {
    package var path: String
    package var message: String
    package init(path: String, message: String) {
        self.path = path
        self.message = message
    }
    package var description: String { "\(path): \(message)" }
}

/// A part of a scan's result, delivered through the scanner's callback (each batch can
/// be written in one transaction). Only differences from the known set are reported.
package struct ScanBatch: Sendable, Equatable {
    /// Entries the caller did not know.
    package var added: [ScannedEntry] = []
    /// Known entries whose kind, size, mtime, inode, mode, target or content changed.
    package var changed: [ScannedEntry] = []
    /// Known paths that are gone (never reported when the folder root is missing).
    package var deleted: [String] = []
    /// Files that changed while they were read: not reported otherwise, rescan later.
    package var unstable: [String] = []
    package var problems: [ScanProblem] = []

    package init() {}

    /// Number of items in the batch.
    package var count: Int { added.count + changed.count + deleted.count + unstable.count + problems.count }
    package var isEmpty: Bool { count == 0 }
}

/// Totals of one scan.
package struct ScanSummary: Sendable, Equatable {
    package var files = 0
    package var directories = 0
    package var symlinks = 0
    /// Entries skipped because of ignore patterns (ignored directories count once).
    package var ignored = 0
    /// Per directory this scan listed that has some, the names in it that another name
    /// there equals under Unicode normalization; and the first of them (paths).
    package var normalizationTwins: [PathKey: Int] = [:]
    package var normalizationTwinNames: [String] = []
    package var added = 0
    package var changed = 0
    package var deleted = 0
    package var unstable = 0
    package var problems = 0
    /// Files whose content was read and hashed.
    package var filesHashed = 0
    /// Files found under a new path and taken over from their old one without reading.
    package var moved = 0
    /// File content bytes read (0 for a rescan where nothing changed).
    package var bytesRead: UInt64 = 0
    /// Batches delivered.
    package var batches = 0
    /// The root directory scanned (see `FolderScanner.expectedRoot`).
    package var root = RootIdentity(device: 0, inode: 0)

    package init() {}
}

/// Which directory a folder root is (device and inode): a different one after a scan
/// means it was replaced or a disk was unmounted from under it.
package struct RootIdentity: Sendable, Hashable {
    package var device: UInt64
    package var inode: UInt64
    package init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// Why a scan stopped.
package enum ScanError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The folder root is gone, is not a directory, or is another directory than expected
    /// (an unmounted disk): nothing is reported as deleted.
    case rootMissing(path: String, reason: String)
    /// The folder root exists but cannot be read.
    case rootUnreadable(FileError)
    /// The `KnownEntrySource` did not return paths in UTF-8 byte order.
    case knownEntriesOutOfOrder(previous: String, next: String)

    package var description: String {
        switch self {
        case let .rootMissing(path, reason):
            return "folder \(path) is missing (\(reason)); the folder is not scanned and nothing is deleted"
        case let .rootUnreadable(error):
            return "folder cannot be read: \(error)"
        case let .knownEntriesOutOfOrder(previous, next):
            return "known entries out of order: \"\(next)\" after \"\(previous)\" (they must be sorted by UTF-8 bytes)"
        }
    }
}

/// `a < b` comparing UTF-8 bytes (the order of `memcmp` and of SQLite's BINARY collation).
func utf8Less(_ a: String, _ b: String) -> Bool {
    var a = a, b = b
    return a.withUTF8 { x in b.withUTF8 { y in bytesLess(x, y) } }
}

/// `a == b` comparing UTF-8 bytes (`String`'s `==` takes canonically equivalent names as one).
func utf8Equal(_ a: String, _ b: String) -> Bool {
    a.utf8.count == b.utf8.count && a.utf8.elementsEqual(b.utf8)
}

/// Whether `a`'s UTF-8 bytes start with `prefix`'s.
func utf8HasPrefix(_ a: String, _ prefix: String) -> Bool {
    a.utf8.starts(with: prefix.utf8)
}

@inline(__always)
func bytesLess(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
    let n = min(x.count, y.count)
    if n > 0 {
        let c = memcmp(x.baseAddress!, y.baseAddress!, n)
        if c != 0 { return c < 0 }
    }
    return x.count < y.count
}

func bytesLess(_ x: [UInt8], _ y: [UInt8]) -> Bool {
    x.withUnsafeBufferPointer { a in y.withUnsafeBufferPointer { b in bytesLess(a, b) } }
}

/// A `KnownEntrySource` plus what was known of renamed files, under their new paths: a file
/// found at the new path with the same inode, size and mtime takes the known manifest and is
/// not read again. The new paths come from renames the kernel reported (inotify
/// MOVED_FROM/MOVED_TO pairs), never from inode numbers alone, which file systems reuse.
package struct KnownEntriesWithMoves<Base: KnownEntrySource>: KnownEntrySource {
    package let base: Base
    /// New path → what was known at the old path (with the new path).
    let moved: [String: ScannedEntry]

    package init(base: Base, moved: [ScannedEntry]) {
        self.base = base
        self.moved = Dictionary(moved.filter { $0.kind == .file && $0.manifest != nil }.map { ($0.path, $0) },
                                uniquingKeysWith: { first, _ in first })
    }

    package func knownEntries(under prefix: String) -> any IteratorProtocol<ScannedEntry> {
        base.knownEntries(under: prefix)
    }

    package func movedFile(path: String, inode: UInt64, size: Int64, mtimeNs: Int64) -> ScannedEntry? {
        guard let entry = moved[path], entry.inode == inode, entry.size == size, entry.mtimeNs == mtimeNs else { return nil }
        return entry
    }
}
