package import PeerModel

/// A folder this node synchronizes, as stored in the `folders` table.
package struct FolderRecord: Sendable, Equatable {
    /// Folder ID shared by every peer of the folder.
    package var id: String
    /// Absolute local path of the folder root.
    package var path: String
    /// Human label shown in the CLI.
    package var label: String
    /// When the folder was added on this node (unix ms).
    package var createdAt: Int64
    /// Scanning and syncing are paused.
    package var paused: Bool
    /// Why the folder stopped syncing (root missing, …); nil when it is fine.
    package var error: String?
    /// When `error` was recorded (unix ms); nil when there is no error.
    package var errorAt: Int64?
    /// Highest local sequence ever assigned in this folder (0 before the first file).
    package var maxSequence: Int64
    /// Random nonzero identity of our index of this folder, sent with index updates.
    package var indexID: Int64
    /// Device and inode of the root directory as adopted (shared, accepted or confirmed);
    /// nil before they were recorded (a folder added by an older version).
    package var rootDevice: UInt64?
    package var rootInode: UInt64?

    package init(id: String, path: String, label: String = "", createdAt: Int64, paused: Bool = false,
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
package struct FolderPeerRecord: Sendable, Equatable {
    package var folderID: String
    package var deviceID: String
    /// Highest of our local sequence numbers this peer acknowledged.
    package var ackedSequence: Int64
    /// Highest of the peer's sequence numbers we received (in the index `remoteIndexID`).
    package var receivedSequence: Int64
    /// The peer's index ID that `receivedSequence` counts in; 0 before the first exchange.
    package var remoteIndexID: Int64

    package init(folderID: String, deviceID: String, ackedSequence: Int64 = 0, receivedSequence: Int64 = 0,
                remoteIndexID: Int64 = 0) {
        self.folderID = folderID
        self.deviceID = deviceID
        self.ackedSequence = ackedSequence
        self.receivedSequence = receivedSequence
        self.remoteIndexID = remoteIndexID
    }
}

/// A folder share offered to us and not answered yet (`folder_offers`).
package struct FolderOffer: Sendable, Equatable {
    package var folderID: String
    /// The offering peer.
    package var deviceID: String
    /// The folder's label on the offering peer.
    package var label: String
    /// When the offer was last received (unix ms).
    package var offeredAt: Int64

    package init(folderID: String, deviceID: String, label: String = "", offeredAt: Int64) {
        self.folderID = folderID
        self.deviceID = deviceID
        self.label = label
        self.offeredAt = offeredAt
    }
}

/// One chunk of a local file (a row of `file_chunks`, without its position, which is
/// the chunk's index in `FileRecord.chunks`).
package struct FileChunkRecord: Sendable, Equatable, Hashable {
    /// Byte offset in the file.
    package var offset: Int64
    /// Length in bytes (> 0).
    package var size: Int64
    /// BLAKE3 of the chunk's bytes (32 bytes; SHA-256 before migration 0005, BLAKE2b-256 before 0004).
    package var hash: [UInt8]

    package init(offset: Int64, size: Int64, hash: [UInt8]) {
        self.offset = offset
        self.size = size
        self.hash = hash
    }
}

/// One path of a folder in the local index (`files` and its `file_chunks`), tombstones
/// included: the entry plus what only the local side has. The entry's fields read as the
/// record's own (`record.path`, `record.version`); its sequence is assigned by
/// `upsertFiles` (whatever the caller passes is ignored).
@dynamicMemberLookup
package struct FileRecord: Sendable, Equatable {
    package var folderID: String
    package var entry: FileEntry
    /// Inode at the last scan; nil when not on disk.
    package var inode: UInt64?
    /// The chunk list, in file order (empty for non-files, tombstones and empty files).
    package var chunks: [FileChunkRecord]

    package init(folderID: String, _ entry: FileEntry, inode: UInt64? = nil, chunks: [FileChunkRecord] = []) {
        self.folderID = folderID
        self.entry = entry
        self.inode = inode
        self.chunks = chunks
    }

    /// The entry's fields read and write as the record's own (`record.path`). Here, not in
    /// a protocol extension of PeerModel: that would make every file that reads a field
    /// import PeerModel (MemberImportVisibility).
    @inlinable
    package subscript<Value>(dynamicMember field: WritableKeyPath<FileEntry, Value>) -> Value {
        get { entry[keyPath: field] }
        set { entry[keyPath: field] = newValue }
    }
}

/// Where a chunk with a given hash can be read locally.
package struct ChunkLocation: Sendable, Equatable, Hashable {
    package var folderID: String
    /// Path relative to the folder root.
    package var path: String
    /// Byte offset of the chunk in that file.
    package var offset: Int64
    /// Chunk length in bytes.
    package var size: Int64

    package init(folderID: String, path: String, offset: Int64, size: Int64) {
        self.folderID = folderID
        self.path = path
        self.offset = offset
        self.size = size
    }
}

/// One path of a peer's index of a folder (`remote_files`), as the peer last reported it:
/// the entry (its sequence is the peer's) plus the manifest as sent.
@dynamicMemberLookup
package struct RemoteFileRecord: Sendable, Equatable {
    package var entry: FileEntry
    /// Encoded manifest as the peer sent it (PeerFiles' `Manifest.encode()`); nil for
    /// directories, symlinks and tombstones. The index does not interpret it.
    package var manifest: [UInt8]?

    package init(_ entry: FileEntry, manifest: [UInt8]? = nil) {
        self.entry = entry
        self.manifest = manifest
    }

    /// The entry's fields read and write as the record's own (`record.path`). Here, not in
    /// a protocol extension of PeerModel: that would make every file that reads a field
    /// import PeerModel (MemberImportVisibility).
    @inlinable
    package subscript<Value>(dynamicMember field: WritableKeyPath<FileEntry, Value>) -> Value {
        get { entry[keyPath: field] }
        set { entry[keyPath: field] = newValue }
    }
}

/// A folder's live records (tombstones left out) added up: what `status` shows.
package struct LiveTotals: Sendable, Equatable {
    /// Live records of every kind.
    package var entries: Int
    /// Live records that are files.
    package var files: Int
    /// Their sizes added up.
    package var bytes: Int64

    package init(entries: Int = 0, files: Int = 0, bytes: Int64 = 0) {
        self.entries = entries
        self.files = files
        self.bytes = bytes
    }
}

/// How a peer's index of a folder compares with the local index.
package struct RemoteComparison: Sendable, Equatable {
    /// The peer's live entries (tombstones left out).
    package var liveEntries: Int
    /// The peer's entries the local index lacks (except tombstones of paths it never had)
    /// or holds with another version, and the local live entries the peer has not reported.
    package var outOfSyncFiles: Int
    /// The sizes of the live ones among them.
    package var outOfSyncBytes: Int64

    package init(liveEntries: Int = 0, outOfSyncFiles: Int = 0, outOfSyncBytes: Int64 = 0) {
        self.liveEntries = liveEntries
        self.outOfSyncFiles = outOfSyncFiles
        self.outOfSyncBytes = outOfSyncBytes
    }
}
