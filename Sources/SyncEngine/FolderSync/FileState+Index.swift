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
    /// tombstones, or a chunk list that does not add up to the size).
    var manifest: Manifest? {
        guard kind == .file, !deleted else { return nil }
        let refs = chunks.compactMap { chunk -> ChunkRef? in
            guard let hash = ChunkHash(bytes: chunk.hash) else { return nil }
            return ChunkRef(offset: UInt64(chunk.offset), size: UInt32(chunk.size), hash: hash)
        }
        return try? Manifest(fileSize: UInt64(size), chunks: refs)
    }
}
