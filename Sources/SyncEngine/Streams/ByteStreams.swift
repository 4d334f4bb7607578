internal import Dispatch
internal import Synchronization

/// How a stream ended, as its reader or writer sees it.
package enum StreamEnd: Sendable, Equatable {
    /// The writer wrote everything and closed the stream.
    case complete
    /// The stream was cut before its end (the peer reset it, the session ended, or a local
    /// cancel); the reason is for people. Never reported as complete.
    case cut(String)
}

/// A byte stream we write to a peer (`Node.openStream(named:to:)`). `write` blocks while
/// the peer's reader has granted no room (back-pressure: at most `StreamTable.window` bytes
/// are in flight), and throws once the stream is cut. Any one thread at a time writes.
package final class OutgoingByteStream: Sendable {
    package let name: String
    package let peer: PeerRef
    let id: UInt32

    private struct State {
        var cut: String?
        var finished = false
        var bytesWritten: Int64 = 0
        /// Credit (or the end) came since the last `tryWrite` and nobody was waiting for it.
        var signalled = false
        /// Who waits for credit (`whenWritable`), run once.
        var writable: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    /// Sends up to the bytes given within the credit left; returns how many it sent (0: no
    /// credit now), or throws when the stream can no longer be written.
    private let sendPiece: @Sendable (UnsafeRawBufferPointer) throws(EngineError) -> Int
    private let close: @Sendable (_ reset: String?) -> Void

    init(name: String, peer: PeerRef, id: UInt32,
         sendPiece: @escaping @Sendable (UnsafeRawBufferPointer) throws(EngineError) -> Int,
         close: @escaping @Sendable (_ reset: String?) -> Void) {
        self.name = name
        self.peer = peer
        self.id = id
        self.sendPiece = sendPiece
        self.close = close
    }

    /// Bytes handed to the session so far.
    package var bytesWritten: Int64 { state.withLock { $0.bytesWritten } }

    /// Why the stream is cut, if it is.
    package var cutReason: String? { state.withLock { $0.cut } }

    /// Writes every byte, waiting for credit as needed (blocks the calling thread; an async
    /// caller uses `tryWrite` and `whenWritable` instead).
    package func write(_ bytes: UnsafeRawBufferPointer) throws(EngineError) {
        var offset = 0
        while offset < bytes.count {
            let sent = try tryWrite(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            if sent == 0 {
                _ = wake.wait(timeout: .now() + .milliseconds(200))
                continue
            }
            offset += sent
        }
    }

    /// Sends what the credit allows of `bytes` now (at most one data frame), without waiting:
    /// how many bytes went, 0 when there is no credit (then `whenWritable` says when to try
    /// again). Throws once the stream is cut or finished.
    package func tryWrite(_ bytes: UnsafeRawBufferPointer) throws(EngineError) -> Int {
        if let reason = state.withLock({ state -> String? in
            state.signalled = false
            return state.finished ? "the stream was already finished" : state.cut
        }) {
            throw .streamCut("stream '\(name)' to \(peer.name) is cut: \(reason)")
        }
        guard !bytes.isEmpty else { return 0 }
        let sent = try sendPiece(UnsafeRawBufferPointer(rebasing: bytes[0..<min(bytes.count, Self.pieceSize)]))
        if sent > 0 { state.withLock { $0.bytesWritten += Int64(sent) } }
        return sent
    }

    /// Runs `handler` once, on any thread, when `tryWrite` may send again (credit arrived, or
    /// the stream ended): at once when that happened since the last `tryWrite`. A handler
    /// given again replaces one that has not run.
    package func whenWritable(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.signalled || state.cut != nil || state.finished {
                state.signalled = false
                return true
            }
            state.writable = handler
            return false
        }
        if now { handler() }
    }

    /// Wakes a blocked `write` and the `whenWritable` handler.
    private func signalWritable() {
        let handler = state.withLock { state -> (@Sendable () -> Void)? in
            defer { state.writable = nil }
            if state.writable == nil { state.signalled = true }
            return state.writable
        }
        handler?()
        wake.signal()
    }

    package func write(_ bytes: [UInt8]) throws(EngineError) {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(EngineError) in try write(raw) } }
        try result.get()
    }

    /// Ends the stream: the peer's reader sees it complete after the bytes written.
    package func finish() throws(EngineError) {
        let cut: String? = state.withLock {
            if $0.cut == nil { $0.finished = true }
            return $0.cut
        }
        if let cut { throw .streamCut("stream '\(name)' to \(peer.name) is cut: \(cut)") }
        close(nil)
    }

    /// Abandons the stream: the peer's reader sees it cut with `reason`.
    package func cancel(reason: String) {
        let first = state.withLock { state -> Bool in
            guard state.cut == nil, !state.finished else { return false }
            state.cut = reason
            return true
        }
        if first { close(reason) }
        signalWritable()
    }

    /// Largest data frame.
    static let pieceSize = 65_536

    // MARK: From the node's queue

    func creditArrived() { signalWritable() }

    func ended(_ reason: String) {
        state.withLock { if $0.cut == nil && !$0.finished { $0.cut = reason } }
        signalWritable()
    }
}

/// A byte stream a peer writes to us. `next` hands out the bytes in order as they arrive,
/// then nil once the peer closed it (complete); it throws `streamCut` when the stream was
/// cut instead. What the consumer takes is granted back to the writer, so at most
/// `StreamTable.window` bytes wait here. One thread at a time reads.
package final class IncomingByteStream: Sendable {
    package let name: String
    package let peer: PeerRef
    let id: UInt32
    let sessionID: UInt64

    private struct State {
        var pieces: [[UInt8]] = []
        var head = 0
        var end: StreamEnd?
        var bytesRead: Int64 = 0
        /// Who waits for bytes or the end (`whenReadable`), run once.
        var readable: (@Sendable () -> Void)?

        var hasNews: Bool { head < pieces.count || end != nil }
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let consumed: @Sendable (Int) -> Void
    private let reset: @Sendable (String) -> Void

    init(name: String, peer: PeerRef, id: UInt32, sessionID: UInt64,
         consumed: @escaping @Sendable (Int) -> Void, reset: @escaping @Sendable (String) -> Void) {
        self.name = name
        self.peer = peer
        self.id = id
        self.sessionID = sessionID
        self.consumed = consumed
        self.reset = reset
    }

    /// Bytes handed to the consumer so far.
    package var bytesRead: Int64 { state.withLock { $0.bytesRead } }

    /// The next bytes, in order; nil when the writer finished (the stream is complete).
    /// Waits at most `timeout` for them (nil: as long as it takes), then throws `timedOut`.
    /// Blocks the calling thread (an async caller uses `poll` and `whenReadable` instead).
    package func next(timeout: Duration? = nil) throws(EngineError) -> [UInt8]? {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            switch try poll() {
            case let .piece(bytes):
                return bytes
            case .complete:
                return nil
            case .empty:
                if let deadline, ContinuousClock.now >= deadline {
                    throw .network("no data on stream '\(name)' from \(peer.name) for \(timeout!)")
                }
                _ = wake.wait(timeout: .now() + .milliseconds(200))
            }
        }
    }

    /// What `poll` found.
    package enum Poll: Sendable, Equatable {
        /// The next bytes, in order (granted back to the writer).
        case piece([UInt8])
        /// The writer finished: every byte was read.
        case complete
        /// Nothing yet: `whenReadable` says when to look again.
        case empty
    }

    /// The next bytes if some are here, without waiting; throws `streamCut` when the stream
    /// was cut.
    package func poll() throws(EngineError) -> Poll {
        enum Step { case piece([UInt8]), done, cut(String), empty }
        let step: Step = state.withLock { state in
            if state.head < state.pieces.count {
                let piece = state.pieces[state.head]
                state.pieces[state.head] = []
                state.head += 1
                if state.head > 64 && state.head * 2 > state.pieces.count {
                    state.pieces.removeFirst(state.head)
                    state.head = 0
                }
                state.bytesRead += Int64(piece.count)
                return .piece(piece)
            }
            switch state.end {
            case .complete: return .done
            case let .cut(reason): return .cut(reason)
            case nil: return .empty
            }
        }
        switch step {
        case let .piece(bytes):
            consumed(bytes.count)
            return .piece(bytes)
        case .done:
            return .complete
        case let .cut(reason):
            throw .streamCut("stream '\(name)' from \(peer.name) was cut after \(bytesRead) bytes: \(reason)")
        case .empty:
            return .empty
        }
    }

    /// Runs `handler` once, on any thread, when `poll` has news (bytes, the end, a cut): at
    /// once when it has now. A handler given again replaces one that has not run.
    package func whenReadable(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.hasNews { return true }
            state.readable = handler
            return false
        }
        if now { handler() }
    }

    /// Wakes a blocked `next` and the `whenReadable` handler.
    private func signalReadable() {
        let handler = state.withLock { state -> (@Sendable () -> Void)? in
            defer { state.readable = nil }
            return state.hasNews ? state.readable : nil
        }
        handler?()
        wake.signal()
    }

    /// Stops reading: the writer sees the stream cut with `reason`.
    package func cancel(reason: String) {
        let first = state.withLock { state -> Bool in
            guard state.end == nil else { return false }
            state.end = .cut(reason)
            state.pieces.removeAll()
            state.head = 0
            return true
        }
        if first { reset(reason) }
        signalReadable()
    }

    // MARK: From the node's queue

    func append(_ bytes: [UInt8]) {
        state.withLock { if $0.end == nil { $0.pieces.append(bytes) } }
        signalReadable()
    }

    func ended(_ end: StreamEnd) {
        state.withLock { if $0.end == nil { $0.end = end } }
        signalReadable()
    }
}
