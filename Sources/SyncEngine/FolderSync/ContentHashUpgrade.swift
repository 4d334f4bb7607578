internal import Glibc
internal import PeerFiles
internal import PeerIndex

/// Protocol version 4 names content with BLAKE3 (migration 0005), version 3 did with
/// SHA-256 (0004), version 2 with BLAKE2b-256. When a node opens its index (before its
/// control socket, any folder or any peer), the records of a folder still marked with an
/// older function are hashed again:
/// - a live file whose size, mtime and inode are still those recorded (the scanner's own
///   test of an unchanged file) gets BLAKE3 chunk hashes over the same chunk ranges (the
///   cut rule did not change) and the new root; its version stays, so no peer sees an edit;
/// - any other record keeps its stale hashes: `FileRecord.manifest` refuses them (never
///   sent, offered or served), and the first scan hashes the file, keeping the version when
///   size, mtime and mode are still those recorded (`SharedFolder.apply`);
/// - a record already hashed with BLAKE3 (an earlier, interrupted pass) is skipped.
/// A folder whose root is not the one it was shared from (an unmounted disk's mount point,
/// a missing directory: `FolderRoot.judge`) is left as it is and stays marked for the next
/// start; its first scan, once the root is back, does the same. Then the folder is marked
/// current.
enum ContentHashUpgrade {
    struct Summary: Equatable {
        var folders = 0
        var rehashed = 0
        /// Records left to the first scan (changed, unreadable, or the root not trusted).
        var left = 0
    }

    /// Records written per index transaction.
    static let batchSize = 256

    /// Runs the pass over every marked folder. An index error stops it (the node does not
    /// open; the next start tries again).
    @discardableResult
    static func run(index: NodeIndex) throws(EngineError) -> Summary {
        var summary = Summary()
        do {
            for folderID in try index.foldersWithOldContentHashes() {
                guard let folder = try index.folder(id: folderID) else { continue }
                guard let root = trustedRoot(folder, index: index) else {
                    summary.left += try index.liveTotals(folderID: folderID).files
                    continue
                }
                try upgrade(folder, root: root, index: index, summary: &summary)
                try index.markContentHashesCurrent(folderID: folderID)
                summary.folders += 1
            }
        } catch {
            throw .index(error)
        }
        return summary
    }

    /// The folder's root, opened, if it is the directory the folder was shared from (the
    /// check every scan makes first).
    static func trustedRoot(_ folder: FolderRecord, index: NodeIndex) -> DirectoryHandle? {
        guard case .success(let observation) = FolderRoot.observe(folder.path) else { return nil }
        let expected = folder.rootIdentity
        // As `SharedFolder.checkRoot`: the live count matters only without a recorded identity.
        // (A count the index cannot give: the root is not trusted, the upgrade waits.)
        guard let live = expected != nil ? 0 : try? index.liveTotals(folderID: folder.id).entries else { return nil }
        switch FolderRoot.judge(observation, folderID: folder.id, expected: expected, liveEntries: live) {
        case .trusted, .adopt: return try? DirectoryHandle(path: folder.path)
        case .refused: return nil
        }
    }

    private static func upgrade(_ folder: FolderRecord, root: DirectoryHandle, index: NodeIndex,
                                summary: inout Summary) throws(IndexError) {
        var after: String?
        while true {
            let page = try index.files(folderID: folder.id, afterPath: after, liveOnly: true, limit: batchSize)
            guard let last = page.last else { return }
            after = last.path
            var changed: [FileRecord] = []
            for record in page where record.hasStaleHashes {
                if let hashed = rehashed(record, under: root) {
                    changed.append(hashed)
                    summary.rehashed += 1
                } else {
                    summary.left += 1
                }
            }
            if !changed.isEmpty { _ = try index.upsertFiles(changed) }
        }
    }

    /// The record with BLAKE3 hashes of its chunk ranges, or nil when the file is not
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
        updated.chunks = manifest.chunkRecords
        updated.rootHash = manifest.rootHash
        return updated
    }
}
