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

    /// Blocks of at least this size are read at their turn to be sent (see `blockSource`).
    static let streamedBlock: UInt32 = 256 << 10

    /// Where a block answer comes from.
    enum BlockSource {
        /// Read it from this open file when its turn to be sent comes, into the session's
        /// buffer, and hash it there before a byte of it is sent (`sendBlockFromAnyThread`);
        /// `indexed`: the stamp the index recorded, to tell damage from a change.
        case file(ChunkReader, ChunkRef, indexed: NodeIndex.FileStamp)
        /// This answer: bytes read and hashed now, or a refusal.
        case answer(BlockAnswer)
    }

    /// How to answer a member's block request. Only a chunk of a live, not-ignored file of the
    /// local index is read: a member never gets an ignored file, a path we do not share, or
    /// an arbitrary range (not even a byte). Every byte served is hashed from the very bytes
    /// sent, and a mismatch is refused (`unavailable`): a file whose size, mtime and inode are
    /// those the index recorded is not proven intact by them. A mismatch under that stamp is
    /// damage (`servedMismatch`: the file is checked and repaired, the user told).
    /// A large block (`streamed`) is left unread: the session reads and hashes it when its
    /// turn to be sent comes (`sendBlockFromAnyThread`), and refuses it there.
    func blockSource(path: String, offset: UInt64, size: UInt32, hash: [UInt8], streamed: Bool = true) -> BlockSource {
        guard let expected = ChunkHash(bytes: hash), let safe = try? SafePath(path), size > 0,
              let start = Int64(exactly: offset), let index else { return .answer(.notShared) }
        // The patterns in force now: a file ignored after it was indexed is not served either.
        guard let ignores = currentIgnores() else { return .answer(.unavailable) }
        guard !ignores.isIgnored(safe.string, isDirectory: false) else { return .answer(.notShared) }
        let indexed: NodeIndex.FileStamp
        do {
            guard let stamp = try index.liveChunkStamp(folderID: id, path: safe.string, offset: start, size: Int64(size), hash: hash) else {
                // Not in a live file: maybe in a version of that path we keep (issue 41).
                return .answer(versionBlock(path: safe.string, offset: start, size: size, hash: expected))
            }
            indexed = stamp
            // A chunk found rotten already is not read again (a member asking for it again and
            // again costs us no read nor hash).
            if damaged.isRotten(safe.string, stamp: stamp, offset: offset) { return .answer(.unavailable) }
        } catch {
            report("cannot look up a block request in the index: \(error)")
            return .answer(.unavailable)
        }
        let chunk = ChunkRef(offset: offset, size: size, hash: expected)
        return servedChunk(safe, chunk, streamed: streamed, indexed: indexed) ?? .answer(.unavailable)
    }

    /// The chunk `chunk` of the file at `safe`, for a member, always hashed from the bytes
    /// sent: a large one (`streamed`) is left unread for the session to read and hash when its
    /// turn to be sent comes; any other is read and hashed now. Nil when the file cannot be
    /// opened or its bytes do not hash right; a mismatch under the stamp `indexed` is damage
    /// (`servedMismatch`).
    func servedChunk(_ safe: SafePath, _ chunk: ChunkRef, streamed: Bool, indexed: NodeIndex.FileStamp) -> BlockSource? {
        guard let rootHandle = try? DirectoryHandle(path: root),
              let resolved = try? safe.resolve(under: rootHandle), resolved.existing == .file,
              let reader = try? ChunkReader(name: resolved.name, in: resolved.directory) else { return nil }
        // Only large blocks are read at their turn: a queued one holds its file open until it
        // is written, and the send queue's byte budget (8 MiB) then bounds the open files of
        // one session to 32. Small blocks cost little to copy, and a peer asking for 1-byte
        // blocks could otherwise make us hold one open file per 33 queued bytes.
        if streamed && chunk.size >= Self.streamedBlock { return .file(reader, chunk, indexed: indexed) }
        do {
            return .answer(.data(try reader.bytes(of: chunk, verify: true)))
        } catch {
            if error.kind == .changedOnDisk { servedMismatch(path: safe.string, offset: chunk.offset, indexed: indexed, file: reader.file.fd) }
            return nil
        }
    }
}

/// What the folder serves of the files it is still fetching (fan-out, `HeldChunks`): decided
/// by the same rules as a placed file's block, as they are at the request.
extension SharedFolder {
    /// The ignore patterns and the selection in force for serving now (nil: nothing is
    /// served, as before the folder first loaded them). The patterns are the ignore file's
    /// as it is now (`ServedRules`), not as `io` last loaded it; when they changed, what we
    /// serve of files being fetched is checked against them (`heldRulesChanged`). A file
    /// that cannot be read (a link, too large) leaves those `io` loaded last, as `io` does.
    func currentIgnores() -> IgnorePatterns? {
        guard let loaded = servedIgnores.withLock({ $0 }) else { return nil }
        guard let (patterns, changed) = servedRules.patterns(root: root) else { return loaded }
        var ignores = patterns
        ignores.selection = loaded.selection
        if changed { dropHeld(excludedBy: ignores) }
        return ignores
    }

    /// Whether the folder serves what it holds of `path`, a file it is fetching, now: not
    /// paused, and neither ignored nor outside the selection.
    func servesHeld(_ path: String) -> Bool {
        guard !paused.load(ordering: .relaxed), let ignores = currentIgnores() else { return false }
        return !ignores.isIgnored(path, isDirectory: false)
    }

    /// A chunk of a file we are fetching, for a member's block request, if the folder's rules
    /// let us serve it now (`servesHeld`); a path they exclude is dropped and withdrawn.
    func heldBytes(path: String, offset: UInt64, size: UInt32, hash: [UInt8]) -> [UInt8]? {
        guard held.isServing(path) else { return nil }
        guard servesHeld(path) else {
            withdrawHeld(path)
            return nil
        }
        return held.bytes(path: path, offset: offset, size: size, hash: hash)
    }

    /// The folder's rules changed (ignore patterns, selection, pause): the files being
    /// fetched that they exclude are no longer served nor announced, and the members are
    /// told we hold none of them. Any thread.
    func heldRulesChanged() {
        if paused.load(ordering: .relaxed) { return withdraw(held.drop { _ in true }) }
        guard let ignores = currentIgnores() else { return withdraw(held.drop { _ in true }) }
        dropHeld(excludedBy: ignores)
    }

    /// `path` is no longer served nor announced while it is fetched; the members are told.
    func withdrawHeld(_ path: String) {
        withdraw(held.drop { $0 == path })
    }

    /// A pull's batch ended (`placed`: the files put in place): the others we announced are withdrawn.
    func heldDone(paths: [String], placed: [String]) {
        withdraw(held.done(paths: paths, placed: Set(placed)))
    }

    private func dropHeld(excludedBy ignores: IgnorePatterns) {
        withdraw(held.drop { ignores.isIgnored($0, isDirectory: false) })
    }

    private func withdraw(_ notes: [HeldChunks.Note]) {
        guard let host else { return }
        for note in notes { host.announceHeld(self, note) }
    }
}
