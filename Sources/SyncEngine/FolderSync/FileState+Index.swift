internal import PeerFiles
internal import PeerIndex

// Conversions between the planner's view of a path and the index's records. Internal:
// the engine's folder code uses them; the index types stay out of SyncEngine's public API.

extension FileState.Kind {
    init(_ kind: FileKind) {
        switch kind {
        case .file: self = .file
        case .directory: self = .directory
        case .symlink: self = .symlink
        }
    }

    var indexKind: FileKind {
        switch self {
        case .file: .file
        case .directory: .directory
        case .symlink: .symlink
        }
    }
}

extension FileState {
    /// The state of a local index record.
    init(_ record: FileRecord) {
        self.init(path: record.path, kind: Kind(record.kind), size: record.size, mtimeNs: record.mtimeNs, mode: record.mode,
                  deleted: record.deleted, symlinkTarget: record.symlinkTarget, version: VersionVector(record.version),
                  rootHash: record.rootHash, modifiedBy: record.modifiedBy, sequence: record.sequence)
    }

    /// The state of a peer's index entry.
    init(_ record: RemoteFileRecord) {
        self.init(path: record.path, kind: Kind(record.kind), size: record.size, mtimeNs: record.mtimeNs, mode: record.mode,
                  deleted: record.deleted, symlinkTarget: record.symlinkTarget, version: VersionVector(record.version),
                  rootHash: record.rootHash, modifiedBy: record.modifiedBy, sequence: record.sequence)
    }

    /// A local index record for this state; the chunk list and inode come from the scan or
    /// the puller (the planner does not carry them). The index assigns the sequence.
    func fileRecord(folderID: String, inode: UInt64? = nil, chunks: [FileChunkRecord] = []) -> FileRecord {
        FileRecord(folderID: folderID, path: path, kind: kind.indexKind, size: size, mtimeNs: mtimeNs, mode: mode,
                   inode: inode, deleted: deleted, symlinkTarget: symlinkTarget, version: version.counters,
                   rootHash: rootHash, modifiedBy: modifiedBy, chunks: deleted ? [] : chunks)
    }
}

extension FileRecord {
    /// The content manifest rebuilt from the recorded chunk list (nil for non-files,
    /// tombstones, a chunk list that does not add up to the size, or one whose root is not
    /// the recorded root). The last is a record whose hashes are not of this version's
    /// function (SHA-256 or BLAKE2b-256, before protocol 4's BLAKE3, not yet hashed again: see
    /// `ContentHashUpgrade`) or a damaged one: it is never offered, sent, served or trusted
    /// by the scanner as this file's content, and the next scan hashes the file again.
    var manifest: Manifest? {
        guard let manifest = chunkManifest, manifest.rootHash == rootHash else { return nil }
        return manifest
    }

    /// The manifest of the recorded chunk list with the root computed now, whatever root is
    /// recorded (nil for non-files, tombstones, or chunks that do not add up to the size).
    var chunkManifest: Manifest? {
        guard kind == .file, !deleted else { return nil }
        var refs: [ChunkRef] = []
        refs.reserveCapacity(chunks.count)
        for chunk in chunks {
            guard let hash = ChunkHash(bytes: chunk.hash), let offset = UInt64(exactly: chunk.offset),
                  let size = UInt32(exactly: chunk.size) else { return nil }
            refs.append(ChunkRef(offset: offset, size: size, hash: hash))
        }
        return try? Manifest(fileSize: UInt64(max(0, size)), chunks: refs)
    }

    /// A live file whose recorded hashes are not this version's (see `manifest`).
    var hasStaleHashes: Bool { kind == .file && !deleted && manifest == nil }
}

extension Manifest {
    /// The chunk list as the index records it.
    var chunkRecords: [FileChunkRecord] {
        chunks.map { FileChunkRecord(offset: Int64($0.offset), size: Int64($0.size), hash: $0.hash.bytes) }
    }
}

extension FolderRecord {
    /// The root's identity as adopted (nil before it was recorded).
    var rootIdentity: RootIdentity? {
        guard let device = rootDevice, let inode = rootInode else { return nil }
        return RootIdentity(device: device, inode: inode)
    }
}
