internal import PeerModel
internal import PeerFiles
internal import PeerIndex

// The content manifest of an index record, and the index's form of a manifest's chunk list.

extension FileRecord {
    /// The content manifest rebuilt from the recorded chunk list (nil for non-files,
    /// tombstones, a chunk list that does not add up to the size, or one whose root is not
    /// the recorded root). The last is a record whose hashes are not of this version's
    /// function (SHA-256 or BLAKE2b-256, before protocol 4's BLAKE3, not yet hashed again: see
    /// `ContentHashUpgrade`) or a damaged one: it is never offered, sent, served or trusted
    /// by the scanner as this file's content, and the next scan hashes the file again.
    var manifest: Manifest? {
        guard let manifest = chunkManifest, manifest.rootHash == entry.rootHash else { return nil }
        return manifest
    }

    /// The manifest of the recorded chunk list with the root computed now, whatever root is
    /// recorded (nil for non-files, tombstones, or chunks that do not add up to the size).
    var chunkManifest: Manifest? {
        guard entry.kind == .file, !entry.deleted else { return nil }
        var refs: [ChunkRef] = []
        refs.reserveCapacity(chunks.count)
        for chunk in chunks {
            guard let hash = ChunkHash(bytes: chunk.hash), let offset = UInt64(exactly: chunk.offset),
                  let size = UInt32(exactly: chunk.size) else { return nil }
            refs.append(ChunkRef(offset: offset, size: size, hash: hash))
        }
        return try? Manifest(fileSize: UInt64(max(0, entry.size)), chunks: refs)
    }

    /// A live file whose recorded hashes are not this version's (see `manifest`).
    var hasStaleHashes: Bool { self.kind == .file && !self.deleted && manifest == nil }
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
