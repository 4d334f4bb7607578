/// What the sync decisions need to know about one path on one side (the local index or a
/// peer's index): no chunk lists, no inode, nothing read from disk.
package struct FileState: Sendable, Hashable, CustomStringConvertible {
    /// What a path is.
    package enum Kind: String, Sendable, CaseIterable {
        case file
        case directory
        case symlink
    }

    /// Path relative to the folder root, '/'-separated.
    package var path: String
    package var kind: Kind
    /// Size in bytes (0 for directories, symlinks and tombstones).
    package var size: Int64
    /// Modification time, unix nanoseconds (for a tombstone: when the deletion was seen).
    package var mtimeNs: Int64
    /// POSIX permission bits.
    package var mode: UInt32
    /// A tombstone: the path was deleted.
    package var deleted: Bool
    /// Target of a symlink; nil for other kinds.
    package var symlinkTarget: String?
    package var version: VersionVector
    /// Root hash of the content manifest; nil for directories, symlinks and tombstones.
    package var rootHash: [UInt8]?
    /// Device ID that made the last change.
    package var modifiedBy: String
    /// Sequence number on the side this state comes from (0 when not yet assigned).
    package var sequence: Int64

    package init(path: String, kind: Kind, size: Int64 = 0, mtimeNs: Int64, mode: UInt32, deleted: Bool = false,
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
    package func hasSameContent(as other: FileState) -> Bool {
        if deleted || other.deleted { return deleted == other.deleted }
        guard kind == other.kind else { return false }
        switch kind {
        case .file: return rootHash == other.rootHash && size == other.size
        case .directory: return true
        case .symlink: return symlinkTarget == other.symlinkTarget
        }
    }

    /// Same content and the same metadata that is applied to disk (mode, and mtime for files).
    package func hasSameContentAndMetadata(as other: FileState) -> Bool {
        guard hasSameContent(as: other) else { return false }
        if deleted { return true }
        return mode == other.mode && (kind != .file || mtimeNs == other.mtimeNs)
    }

    /// A copy with another version (sequence reset: the receiving side assigns its own).
    func with(version: VersionVector) -> FileState {
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
