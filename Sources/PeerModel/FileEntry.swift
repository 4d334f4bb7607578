/// One path of a shared folder on one side (the local index, a peer's index, an index
/// update on the wire): the one file model. The planner decides on it as it is; the local
/// record adds the inode and chunk list (`FileRecord`), the remote record and the wire the
/// encoded manifest. No chunk lists, no inode, nothing read from disk.
package struct FileEntry: Sendable, Hashable, CustomStringConvertible {
    /// Path relative to the folder root, '/'-separated.
    package var path: String
    package var kind: FileKind
    /// Size in bytes (0 for directories, symlinks and tombstones).
    package var size: Int64
    /// Modification time, unix nanoseconds (for a tombstone: when the deletion was seen).
    package var mtimeNs: Int64
    /// POSIX permission bits.
    package var mode: UInt32
    /// A tombstone: the path was deleted.
    package var deleted: Bool
    /// Target of a symlink; nil for other kinds (nil is "not a link", never "").
    package var symlinkTarget: String?
    /// Device key → counter (kept as the dictionary the index's JSON decodes to).
    package var version: VersionVector
    /// Root hash of the content manifest; nil for directories, symlinks and tombstones.
    package var rootHash: [UInt8]?
    /// Device ID that made the last change.
    package var modifiedBy: String
    /// Sequence number on the side this state comes from (0 when not yet assigned).
    package var sequence: Int64

    package init(path: String, kind: FileKind, size: Int64 = 0, mtimeNs: Int64, mode: UInt32, deleted: Bool = false,
                symlinkTarget: String? = nil, version: VersionVector, rootHash: [UInt8]? = nil, modifiedBy: String,
                sequence: Int64 = 0) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtimeNs = mtimeNs
        self.mode = mode
        self.deleted = deleted
        self.symlinkTarget = symlinkTarget
        self.version = version
        self.rootHash = rootHash
        self.modifiedBy = modifiedBy
        self.sequence = sequence
    }

    /// Whether the two states have the same content on disk: both deleted, or the same
    /// kind with the same bytes (root hash) or the same link target. Metadata (mode,
    /// mtime) and versions are not compared.
    package func hasSameContent(as other: FileEntry) -> Bool {
        if deleted || other.deleted { return deleted == other.deleted }
        guard kind == other.kind else { return false }
        switch kind {
        case .file: return rootHash == other.rootHash && size == other.size
        case .directory: return true
        case .symlink: return symlinkTarget == other.symlinkTarget
        }
    }

    /// Same content and the same metadata that is applied to disk (mode, and mtime for files).
    package func hasSameContentAndMetadata(as other: FileEntry) -> Bool {
        guard hasSameContent(as: other) else { return false }
        if deleted { return true }
        return mode == other.mode && (kind != .file || mtimeNs == other.mtimeNs)
    }

    /// A copy with another version (sequence reset: the receiving side assigns its own).
    package func with(version: VersionVector) -> FileEntry {
        var copy = self
        copy.version = version
        copy.sequence = 0
        return copy
    }

    package var description: String {
        let what = deleted ? "deleted \(kind.rawValue)" : kind.rawValue
        return "\(path) (\(what), \(version), by \(modifiedBy.prefix(7)))"
    }
}
