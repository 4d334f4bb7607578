internal import Glibc
internal import PeerFiles
internal import PeerIndex

/// Protocol version 3 names content with SHA-256 instead of BLAKE2b-256 (migration 0004).
/// Before any folder starts or any peer connects, the records of a folder still marked with
/// the old hash are hashed again:
/// - a live file whose size, mtime and inode are still those recorded (the scanner's own
///   test of an unchanged file) gets SHA-256 chunk hashes over the same chunk ranges (the
///   cut rule did not change) and the new root; its version stays, so no peer sees an edit;
/// - a file that changed meanwhile, is gone or cannot be read loses its recorded inode, so
///   the first scan hashes it and records whatever changed, as for any file;
/// - an empty file gets the new empty root; directories, links and tombstones hold no hash.
/// A folder whose root cannot be opened has every record's inode forgotten (its first scan
/// once the root is back hashes everything). Then the folder is marked current. A crash
/// midway repeats the pass; hashing the same bytes again gives the same records.
enum ContentHashUpgrade {
    struct Summary: Equatable {
        var folders = 0
        var rehashed = 0
        var forgotten = 0
    }

    /// Records written per index transaction.
    static let batchSize = 256

    /// Runs the pass over every marked folder; index errors stop it (the node does not
    /// start: serving old hashes would be wrong, and the next start tries again).
    @discardableResult
    static func run(index: NodeIndex) throws(EngineError) -> Summary {
        var summary = Summary()
        do {
            for folderID in try index.foldersWithOldContentHashes() {
                guard let folder = try index.folder(id: folderID) else { continue }
                try upgrade(folder, index: index, summary: &summary)
                try index.markContentHashesCurrent(folderID: folderID)
                summary.folders += 1
            }
        } catch {
            throw .index(error)
        }
        return summary
    }

    private static func upgrade(_ folder: FolderRecord, index: NodeIndex, summary: inout Summary) throws(IndexError) {
        let root = try? DirectoryHandle(path: folder.path)
        var after: String?
        while true {
            let page = try index.files(folderID: folder.id, afterPath: after, liveOnly: true, limit: batchSize)
            guard let last = page.last else { return }
            after = last.path
            var changed: [FileRecord] = []
            for record in page where record.kind == .file {
                if let root, let hashed = rehashed(record, under: root) {
                    changed.append(hashed)
                    summary.rehashed += 1
                } else if record.inode != nil {
                    var forgotten = record
                    forgotten.inode = nil
                    changed.append(forgotten)
                    summary.forgotten += 1
                }
            }
            if !changed.isEmpty { _ = try index.upsertFiles(changed) }
        }
    }

    /// The record with SHA-256 hashes of its chunk ranges, or nil when the file is not
    /// exactly what the record describes (or cannot be read).
    static func rehashed(_ record: FileRecord, under root: DirectoryHandle) -> FileRecord? {
        guard let inode = record.inode, let safe = try? SafePath(record.path),
              let resolved = try? safe.resolve(under: root), resolved.existing == .file,
              let reader = try? ChunkReader(name: resolved.name, in: resolved.directory),
              let stamp = reader.stamp(), stamp.size == record.size, stamp.mtimeNs == record.mtimeNs,
              stamp.inode == inode else { return nil }
        var chunks: [ChunkRef] = []
        chunks.reserveCapacity(record.chunks.count)
        for chunk in record.chunks {
            guard let offset = UInt64(exactly: chunk.offset), let size = UInt32(exactly: chunk.size),
                  let hash = try? reader.withBytes(at: offset, size: Int(size), { ChunkHash.of($0) }) else { return nil }
            chunks.append(ChunkRef(offset: offset, size: size, hash: hash))
        }
        guard let manifest = try? Manifest(fileSize: UInt64(record.size), chunks: chunks) else { return nil }
        var updated = record
        updated.chunks = chunks.map { FileChunkRecord(offset: Int64($0.offset), size: Int64($0.size), hash: $0.hash.bytes) }
        updated.rootHash = manifest.rootHash
        return updated
    }
}
