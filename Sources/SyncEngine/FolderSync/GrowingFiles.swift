internal import PeerFiles
internal import Synchronization

/// The large files a folder's scans are hashing or just hashed, and the chunks cut of each
/// so far (issue 43: the streamed announcement, hello feature `growing-files`).
///
///     scanner (cuts chunks) ─▶ `record` ─▶ Note ─▶ `growingFile` frame to members that take it
///     member's block request, not in the index ─▶ `lists` ─▶ read, hashed, served if it matches
///
/// A peer that fetches a file only once its index entry came waits for the whole file to be
/// hashed first (A-share: 0.34 + 0.23 CPU-s for 1 GiB before the first block is asked for).
/// With this, members fetch what is hashed while the rest is, as `send` does with a streamed
/// manifest. Bounds: `maxFiles` files (the newest), at most `maxChunks` chunks each (the
/// rest of a larger file is not told); a file's chunks are forgotten when its hashing is
/// abandoned, when a newer hashing of its path starts, or when `maxFiles` newer ones did.
final class GrowingFiles: Sendable {
    /// What the members are told of one file (`Frame.growingFile`); no chunks: abandoned.
    struct Note: Sendable, Equatable {
        let path: String
        let scan: UInt64
        let size: UInt64
        let offset: UInt64
        let chunks: [ChunkRef]
    }

    static let maxFiles = 4
    static let maxChunks = 65_536

    private struct File {
        var scan: UInt64
        /// Offset → chunk.
        var chunks: [UInt64: ChunkRef]
        var end: UInt64
    }

    private struct State {
        var files: [PathKey: File] = [:]
        /// Oldest first.
        var order: [PathKey] = []
    }

    /// Files of at least this size are told of while they are hashed (`SYNCPEER_GROWING_FROM`).
    let threshold = Atomic<UInt64>(64 << 20)
    private let state = Mutex(State())

    /// Keeps what the scanner said (its thread) and returns what to tell the members, if anything.
    func record(_ event: GrowingFileEvent) -> Note? {
        state.withLock { state in
            switch event {
            case let .abandoned(path, scan):
                let key = PathKey(path)
                guard state.files[key]?.scan == scan else { return nil }
                state.files[key] = nil
                state.order.removeAll { $0 == key }
                return Note(path: path, scan: scan, size: 0, offset: 0, chunks: [])
            case let .chunks(path, scan, stamp, chunks):
                let key = PathKey(path)
                guard let first = chunks.first else { return nil }
                if state.files[key]?.scan != scan {
                    guard first.offset == 0 else { return nil }
                    state.order.removeAll { $0 == key }
                    state.order.append(key)
                    state.files[key] = File(scan: scan, chunks: [:], end: 0)
                    while state.order.count > Self.maxFiles { state.files[state.order.removeFirst()] = nil }
                }
                guard var file = state.files[key], file.end == first.offset else { return nil }
                let room = max(0, Self.maxChunks - file.chunks.count)
                let kept = Array(chunks.prefix(room))
                guard !kept.isEmpty else { return nil }
                for chunk in kept { file.chunks[chunk.offset] = chunk }
                file.end = kept.last!.end
                state.files[key] = file
                return Note(path: path, scan: scan, size: stamp.size, offset: first.offset, chunks: kept)
            }
        }
    }

    /// The chunk with exactly this offset, size and hash told of `path`, if any (any thread).
    func told(path: String, offset: UInt64, size: UInt32, hash: [UInt8]) -> ChunkRef? {
        state.withLock { state in
            guard let chunk = state.files[PathKey(path)]?.chunks[offset], chunk.size == size, chunk.hash.bytes == hash else { return nil }
            return chunk
        }
    }

    /// Files whose chunks are kept now (tests, status).
    var count: Int { state.withLock { $0.files.count } }
}
