/// A folder this node synchronizes, as stored in the `folders` table.
public struct FolderRecord: Sendable, Equatable {
    /// Folder ID shared by every peer of the folder.
    public var id: String
    /// Absolute local path of the folder root.
    public var path: String
    /// Human label shown in the CLI.
    public var label: String
    /// When the folder was added on this node (unix ms).
    public var createdAt: Int64
    /// Scanning and syncing are paused.
    public var paused: Bool
    /// Why the folder stopped syncing (root missing, …); nil when it is fine.
    public var error: String?
    /// When `error` was recorded (unix ms); nil when there is no error.
    public var errorAt: Int64?
    /// Highest local sequence ever assigned in this folder (0 before the first file).
    public var maxSequence: Int64
    /// Random nonzero identity of our index of this folder, sent with index updates.
    public var indexID: Int64
    /// Device and inode of the root directory as adopted (shared, accepted or confirmed);
    /// nil before they were recorded (a folder added by an older version).
    public var rootDevice: UInt64?
    public var rootInode: UInt64?

    public init(id: String, path: String, label: String = "", createdAt: Int64, paused: Bool = false,
                error: String? = nil, errorAt: Int64? = nil, maxSequence: Int64 = 0, indexID: Int64,
                rootDevice: UInt64? = nil, rootInode: UInt64? = nil) {
        self.id = id
        self.path = path
        self.label = label
        self.createdAt = createdAt
        self.paused = paused
        self.error = error
        self.errorAt = errorAt
        self.maxSequence = maxSequence
        self.indexID = indexID
        self.rootDevice = rootDevice
        self.rootInode = rootInode
    }
}

/// A peer sharing a folder and how far index exchange has come with it (`folder_peers`).
public struct FolderPeerRecord: Sendable, Equatable {
    public var folderID: String
    public var deviceID: String
    /// Highest of our local sequence numbers this peer acknowledged.
    public var ackedSequence: Int64
    /// Highest of the peer's sequence numbers we received (in the index `remoteIndexID`).
    public var receivedSequence: Int64
    /// The peer's index ID that `receivedSequence` counts in; 0 before the first exchange.
    public var remoteIndexID: Int64

    public init(folderID: String, deviceID: String, ackedSequence: Int64 = 0, receivedSequence: Int64 = 0,
                remoteIndexID: Int64 = 0) {
        self.folderID = folderID
        self.deviceID = deviceID
        self.ackedSequence = ackedSequence
        self.receivedSequence = receivedSequence
        self.remoteIndexID = remoteIndexID
    }
}

/// A folder share offered to us and not answered yet (`folder_offers`).
public struct FolderOffer: Sendable, Equatable {
    public var folderID: String
    /// The offering peer.
    public var deviceID: String
    /// The folder's label on the offering peer.
    public var label: String
    /// When the offer was last received (unix ms).
    public var offeredAt: Int64

    public init(folderID: String, deviceID: String, label: String = "", offeredAt: Int64) {
        self.folderID = folderID
        self.deviceID = deviceID
        self.label = label
        self.offeredAt = offeredAt
    }
}

/// What a path in a folder is.
public enum FileKind: String, Sendable, CaseIterable {
    case file
    case directory
    case symlink
}

/// One chunk of a local file (a row of `file_chunks`, without its position, which is
/// the chunk's index in `FileRecord.chunks`).
public struct FileChunkRecord: Sendable, Equatable, Hashable {
    /// Byte offset in the file.
    public var offset: Int64
    /// Length in bytes (> 0).
    public var size: Int64
    /// BLAKE3 of the chunk's bytes (32 bytes; SHA-256 before migration 0005, BLAKE2b-256 before 0004).
    public var hash: [UInt8]

    public init(offset: Int64, size: Int64, hash: [UInt8]) {
        self.offset = offset
        self.size = size
        self.hash = hash
    }
}

/// One path of a folder in the local index (`files` and its `file_chunks`), tombstones included.
public struct FileRecord: Sendable, Equatable {
    public var folderID: String
    /// Path relative to the folder root, '/'-separated.
    public var path: String
    /// Local sequence number. Assigned by `upsertFiles`; whatever the caller passes is ignored.
    public var sequence: Int64
    public var kind: FileKind
    /// Size in bytes (0 for directories, symlinks and tombstones).
    public var size: Int64
    /// Modification time, unix nanoseconds.
    public var mtimeNs: Int64
    /// POSIX permission bits (st_mode & 07777).
    public var mode: UInt32
    /// Inode at the last scan; nil when not on disk.
    public var inode: UInt64?
    /// Tombstone: the path was deleted (the record keeps its version history).
    public var deleted: Bool
    /// Target of a symlink; nil for other kinds.
    public var symlinkTarget: String?
    /// Version vector: device ID → counter.
    public var version: [String: UInt64]
    /// Root hash of the content manifest (32 bytes); nil without content.
    public var rootHash: [UInt8]?
    /// Device ID that made the last change (may be us).
    public var modifiedBy: String
    /// The chunk list, in file order (empty for non-files, tombstones and empty files).
    public var chunks: [FileChunkRecord]

    public init(folderID: String, path: String, sequence: Int64 = 0, kind: FileKind, size: Int64 = 0, mtimeNs: Int64,
                mode: UInt32, inode: UInt64? = nil, deleted: Bool = false, symlinkTarget: String? = nil,
                version: [String: UInt64], rootHash: [UInt8]? = nil, modifiedBy: String, chunks: [FileChunkRecord] = []) {
        self.folderID = folderID
        self.path = path
        self.sequence = sequence
        self.kind = kind
        self.size = size
        self.mtimeNs = mtimeNs
        self.mode = mode
        self.inode = inode
        self.deleted = deleted
        self.symlinkTarget = symlinkTarget
        self.version = version
        self.rootHash = rootHash
        self.modifiedBy = modifiedBy
        self.chunks = chunks
    }
}

/// Where a chunk with a given hash can be read locally.
public struct ChunkLocation: Sendable, Equatable, Hashable {
    public var folderID: String
    /// Path relative to the folder root.
    public var path: String
    /// Byte offset of the chunk in that file.
    public var offset: Int64
    /// Chunk length in bytes.
    public var size: Int64

    public init(folderID: String, path: String, offset: Int64, size: Int64) {
        self.folderID = folderID
        self.path = path
        self.offset = offset
        self.size = size
    }
}

/// One path of a peer's index of a folder (`remote_files`), as the peer last reported it.
public struct RemoteFileRecord: Sendable, Equatable {
    /// Path relative to the folder root, '/'-separated.
    public var path: String
    /// The peer's local sequence number of this entry.
    public var sequence: Int64
    public var kind: FileKind
    public var size: Int64
    /// Modification time on the peer, unix nanoseconds.
    public var mtimeNs: Int64
    public var mode: UInt32
    public var deleted: Bool
    public var symlinkTarget: String?
    /// Version vector: device ID → counter.
    public var version: [String: UInt64]
    public var rootHash: [UInt8]?
    public var modifiedBy: String
    /// Encoded manifest as the peer sent it (PeerFiles' `Manifest.encode()`); nil for
    /// directories, symlinks and tombstones. The index does not interpret it.
    public var manifest: [UInt8]?

    public init(path: String, sequence: Int64, kind: FileKind, size: Int64 = 0, mtimeNs: Int64, mode: UInt32,
                deleted: Bool = false, symlinkTarget: String? = nil, version: [String: UInt64], rootHash: [UInt8]? = nil,
                modifiedBy: String, manifest: [UInt8]? = nil) {
        self.path = path
        self.sequence = sequence
        self.kind = kind
        self.size = size
        self.mtimeNs = mtimeNs
        self.mode = mode
        self.deleted = deleted
        self.symlinkTarget = symlinkTarget
        self.version = version
        self.rootHash = rootHash
        self.modifiedBy = modifiedBy
        self.manifest = manifest
    }
}

/// A folder's live records (tombstones left out) added up: what `status` shows.
public struct LiveTotals: Sendable, Equatable {
    /// Live records of every kind.
    public var entries: Int
    /// Live records that are files.
    public var files: Int
    /// Their sizes added up.
    public var bytes: Int64

    public init(entries: Int = 0, files: Int = 0, bytes: Int64 = 0) {
        self.entries = entries
        self.files = files
        self.bytes = bytes
    }
}

/// How a peer's index of a folder compares with the local index.
public struct RemoteComparison: Sendable, Equatable {
    /// The peer's live entries (tombstones left out).
    public var liveEntries: Int
    /// The peer's entries the local index lacks (except tombstones of paths it never had)
    /// or holds with another version, and the local live entries the peer has not reported.
    public var outOfSyncFiles: Int
    /// The sizes of the live ones among them.
    public var outOfSyncBytes: Int64

    public init(liveEntries: Int = 0, outOfSyncFiles: Int = 0, outOfSyncBytes: Int64 = 0) {
        self.liveEntries = liveEntries
        self.outOfSyncFiles = outOfSyncFiles
        self.outOfSyncBytes = outOfSyncBytes
    }
}
