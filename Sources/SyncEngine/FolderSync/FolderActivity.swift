internal import PeerFiles
internal import FoundationEssentials
internal import Synchronization

/// What a shared folder is moving right now, and has moved since the daemon started: the
/// files being assembled (with their progress), and per peer the block bytes fetched from it
/// and served to it, plus the bytes taken from local files instead of the network (a rename
/// or a copy), and the bytes its scans read. Written from the folder's `io`, its block callbacks and its serve queue; read
/// by `syncpeer status` from the control thread.
final class FolderActivity: Sendable {
    struct Current: Sendable {
        let path: String
        let size: Int64
        /// Bytes that must come from peers (the rest came from local files).
        let needed: Int64
        var fetched: Int64 = 0
        let peers: [String]
    }

    struct Counters: Sendable {
        var current: [PathKey: Current] = [:]
        var received: [String: Int64] = [:]
        var sent: [String: Int64] = [:]
        var reused: Int64 = 0
        /// File content read by scans (0 for a rescan with nothing changed, or a rename).
        var scanned: Int64 = 0
    }

    private let state = Mutex(Counters())

    func begin(path: String, size: Int64, needed: Int64, peers: [String]) {
        state.withLock { $0.current[PathKey(path)] = Current(path: path, size: size, needed: needed, peers: peers) }
    }

    /// A chunk of `bytes` arrived for `path`, in an answer of `received` bytes from `device`
    /// (the chunk, or a delta's bitmap and blocks), and `reused` of its bytes from our own
    /// file (a delta's equal blocks). An answer that gave no chunk counts with `bytes` 0.
    func fetched(path: String, from device: String, bytes: Int, received: Int? = nil, reused: Int = 0) {
        state.withLock {
            $0.current[PathKey(path)]?.fetched += Int64(bytes)
            $0.received[device, default: 0] += Int64(received ?? bytes)
            $0.reused += Int64(reused)
        }
    }

    func served(to device: String, bytes: Int) {
        state.withLock { $0.sent[device, default: 0] += Int64(bytes) }
    }

    func reused(bytes: Int) {
        state.withLock { $0.reused += Int64(bytes) }
    }

    func scanned(bytes: UInt64) {
        state.withLock { $0.scanned += Int64(clamping: bytes) }
    }

    /// A batch is placed (or dropped): its files are no longer in flight.
    func end(paths: [String]) {
        state.withLock { counters in
            for path in paths { counters.current[PathKey(path)] = nil }
        }
    }

    var snapshot: Counters { state.withLock { $0 } }
}
