internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// Blocks a member asks of the folder, answered on its `serveQueue` (never waiting for `io`).
extension SharedFolder {
    /// What a block request gets.
    enum BlockAnswer: Equatable {
        case data([UInt8])
        /// Not something this folder shares: an unknown, deleted or ignored path, or a range
        /// that is not one of the file's chunks (offset, size and hash as the index holds them).
        case notShared
        /// Shared, but not readable as indexed right now (changed on disk since the scan).
        case unavailable
    }

    /// Blocks of at least this size are streamed from the file (see `blockSource`).
    static let streamedBlock: UInt32 = 256 << 10

    /// Where a block answer comes from.
    enum BlockSource {
        /// Read it from this open file, unhashed: its size, mtime and inode are still those the
        /// index recorded when it hashed the chunk (the asker verifies it anyway).
        case file(ChunkReader, ChunkRef)
        /// This answer: verified bytes (the file's stamp changed, so they were hashed), or a refusal.
        case answer(BlockAnswer)
    }

    /// How to answer a member's block request. Only a chunk of a live, not-ignored file of the
    /// local index is read: a member never gets an ignored file, a path we do not share, or
    /// an arbitrary range (not even a byte). The bytes are trusted without hashing them
    /// again while the file's size, mtime and inode are still those the index recorded when
    /// it hashed them (the scanner's own test of an unchanged file); otherwise they are
    /// hashed, and a mismatch is `unavailable`. The receiver verifies every chunk anyway.
    /// A large block of an unchanged file is left unread: the server streams it from the
    /// file into the channel (`sendBlockFromAnyThread`).
    func blockSource(path: String, offset: UInt64, size: UInt32, hash: [UInt8]) -> BlockSource {
        guard let expected = ChunkHash(bytes: hash), let safe = try? SafePath(path), size > 0,
              let start = Int64(exactly: offset), let index else { return .answer(.notShared) }
        // The patterns in force now: a file ignored after it was indexed is not served either.
        guard let ignores = servedIgnores.withLock({ $0 }) else { return .answer(.unavailable) }
        guard !ignores.isIgnored(safe.string, isDirectory: false) else { return .answer(.notShared) }
        let indexed: NodeIndex.FileStamp
        do {
            guard let stamp = try index.liveChunkStamp(folderID: id, path: safe.string, offset: start, size: Int64(size), hash: hash) else {
                // Not in a live file: maybe in a version of that path we keep (issue 41).
                return .answer(versionBlock(path: safe.string, offset: start, size: size, hash: expected))
            }
            indexed = stamp
        } catch {
            report("cannot look up a block request in the index: \(error)")
            return .answer(.unavailable)
        }
        guard let rootHandle = try? DirectoryHandle(path: root),
              let resolved = try? safe.resolve(under: rootHandle), resolved.existing == .file,
              let reader = try? ChunkReader(name: resolved.name, in: resolved.directory) else {
            return .answer(.unavailable)
        }
        let onDisk = reader.stamp()
        let unchanged = onDisk != nil && indexed.inode != nil && onDisk?.size == indexed.size
            && onDisk?.mtimeNs == indexed.mtimeNs && onDisk?.inode == indexed.inode
        let chunk = ChunkRef(offset: offset, size: size, hash: expected)
        // Only large blocks are streamed: a queued streamed answer holds its file open until
        // it is written, and the send queue's byte budget (8 MiB) then bounds the open files
        // of one session to 32. Small blocks cost little to copy, and a peer asking for
        // 1-byte blocks could otherwise make us hold one open file per 33 queued bytes.
        if unchanged && size >= Self.streamedBlock { return .file(reader, chunk) }
        guard let bytes = try? reader.bytes(of: chunk, verify: !unchanged) else { return .answer(.unavailable) }
        return .answer(.data(bytes))
    }
}
