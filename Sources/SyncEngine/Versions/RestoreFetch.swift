internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import Synchronization

/// The chunks of a version being restored that this node's store lacks, asked of the devices
/// that hold the version: spread over them (chunk i first of holder i mod n, then of the
/// others in turn), at most `window` requests and `windowBytes` bytes in flight at once (a
/// peer serves each from its store; a restore of 1 GiB is not 2,000 round trips in a row,
/// nor 1 GiB in memory). Every answer must have the chunk's size and hash; a wrong or missing
/// one is asked of the next holder, and a chunk no holder gives ends the fetch. Each chunk is
/// handed to `write` on the calling thread, in the order the answers arrive.
struct RestoreFetch {
    static let window = 8
    static let windowBytes = 32 << 20

    /// Asks `device` for `chunk`; `answer` gets its bytes (nil: none), on any thread, once.
    typealias Ask = (_ device: String, _ chunk: ChunkRef, _ answer: @escaping @Sendable ([UInt8]?) -> Void) -> Void

    enum Failure: Error, Equatable {
        /// No holder gave the chunk at this offset (or none verified).
        case unavailable(offset: UInt64)
        /// `write` refused a chunk.
        case write(offset: UInt64)
    }

    let holders: [String]
    var window = RestoreFetch.window
    var windowBytes = RestoreFetch.windowBytes
    let ask: Ask

    /// The answers that arrived and are not handled yet, and a count of them to wait on.
    private final class Arrivals: Sendable {
        let list = Mutex<[(index: Int, attempt: Int, bytes: [UInt8]?)]>([])
        let signal = DispatchSemaphore(value: 0)
    }

    /// Fetches `chunks`, handing each verified one to `write` (the device it came from too);
    /// nil when every chunk was written.
    func run(_ chunks: [ChunkRef], write: (ChunkRef, [UInt8], String) -> Bool) -> Failure? {
        guard let first = chunks.first else { return nil }
        guard !holders.isEmpty else { return .unavailable(offset: first.offset) }
        let arrivals = Arrivals()
        var (next, inFlight, inFlightBytes, written) = (0, 0, 0, 0)
        func launch(_ index: Int, attempt: Int) {
            let chunk = chunks[index]
            inFlight += 1
            inFlightBytes += Int(chunk.size)
            ask(holders[(index + attempt) % holders.count], chunk) { bytes in
                arrivals.list.withLock { $0.append((index, attempt, bytes)) }
                arrivals.signal.signal()
            }
        }
        while written < chunks.count {
            while next < chunks.count, inFlight < window, inFlight == 0 || inFlightBytes + Int(chunks[next].size) <= windowBytes {
                launch(next, attempt: 0)
                next += 1
            }
            arrivals.signal.wait()
            let arrived = arrivals.list.withLock { list in defer { list.removeAll() }; return list }
            for (index, attempt, bytes) in arrived {
                let chunk = chunks[index]
                inFlight -= 1
                inFlightBytes -= Int(chunk.size)
                if let bytes, bytes.count == Int(chunk.size), ChunkHash.of(bytes) == chunk.hash {
                    guard write(chunk, bytes, holders[(index + attempt) % holders.count]) else { return .write(offset: chunk.offset) }
                    written += 1
                } else if attempt + 1 < holders.count {
                    launch(index, attempt: attempt + 1)
                } else {
                    // (Answers still in flight go to `arrivals`, which nobody reads any more.)
                    return .unavailable(offset: chunk.offset)
                }
            }
        }
        return nil
    }
}

/// A restore's progress as `transfer` events (no ID, direction `receive`, named by the path
/// asked for): `bytes` of `total` for the whole restore (every file of a tree), `files` in
/// it, `path` the file being written. One when it starts, then at most every
/// `interval` as chunks are written, and the last one `completed` (or `failed`).
final class RestoreProgress {
    static let interval: Duration = .milliseconds(200)
    private let name: String
    private let total: Int64
    private let files: Int
    private let emit: (TransferInfo) -> Void
    private var done: Int64 = 0
    private var path: String?
    private var last: ContinuousClock.Instant?

    init(name: String, total: Int64, files: Int, emit: @escaping (TransferInfo) -> Void) {
        (self.name, self.total, self.files, self.emit) = (name, total, files, emit)
    }

    /// A file starts (`path`, absolute).
    func file(_ path: String) {
        self.path = path
        send(force: last == nil)
    }

    /// `bytes` more were written.
    func add(_ bytes: Int64) {
        done += bytes
        send(force: false)
    }

    /// A file ended without all its bytes written: they are counted as done for the whole.
    func skip(to end: Int64) {
        done = max(done, end)
    }

    func finish(failed: Int) {
        event(failed == 0 ? .completed : .failed, reason: failed == 0 ? nil : "\(failed) of \(files) file(s) not restored")
    }

    private func event(_ state: TransferState, reason: String? = nil) {
        var info = TransferInfo.unrecorded(direction: .receive, name: name, state: state, bytes: done, total: total, path: path,
                                           reason: reason)
        info.files = files
        emit(info)
    }

    private func send(force: Bool) {
        let now = ContinuousClock.now
        guard force || last.map({ now - $0 >= Self.interval }) ?? true else { return }
        last = now
        event(.active)
    }
}
