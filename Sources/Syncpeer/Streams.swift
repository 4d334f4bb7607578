public import Foundation
internal import SyncEngine

/// A byte stream to a peer (`Session.startStream`; Multipeer Connectivity's `OutputStream`).
///
/// `write` suspends the calling task (it never blocks a thread) while the peer's reader has
/// granted no room: back-pressure, at most 2 MiB in flight. A stream cut by the peer or by
/// the end of the session throws `streamCut`. `finish()` completes it; `cancel` cuts it.
///
/// Cancellation: a `write` whose task is cancelled throws `.cancelled` at once and **cuts
/// the stream** (the reader sees it cut): part of the data may be on its way, and a reader
/// must never take a stream with a hole in it for a whole one.
public final class OutputByteStream: Sendable {
    let stream: OutgoingByteStream
    init(_ stream: OutgoingByteStream) { self.stream = stream }

    public var name: String { stream.name }
    public var peer: PeerID { PeerID(stream.peer) }
    /// Bytes written so far.
    public var bytesWritten: Int64 { stream.bytesWritten }

    /// Writes every byte of `data`, suspending while the reader grants no room.
    public func write(_ data: Data) async throws(SyncpeerError) {
        var offset = 0
        while offset < data.count {
            let stream = self.stream
            let attempt = data.withUnsafeBytes { raw in
                Result { () throws(EngineError) in try stream.tryWrite(UnsafeRawBufferPointer(rebasing: raw[offset...])) }
            }
            let sent: Int
            do throws(EngineError) { sent = try attempt.get() } catch { throw SyncpeerError(error) }
            if sent > 0 {
                offset += sent
                continue
            }
            if Task.isCancelled {
                stream.cancel(reason: "the writer was cancelled")
                throw .cancelled
            }
            let room = OneShot<Void>()
            stream.whenWritable { room.resolve(.success(())) }
            do throws(SyncpeerError) { try await room.value() } catch {
                stream.cancel(reason: "the writer was cancelled")
                throw error
            }
        }
    }

    /// Ends the stream: the reader sees it complete after the bytes written.
    public func finish() throws(SyncpeerError) {
        do throws(EngineError) { try stream.finish() } catch { throw SyncpeerError(error) }
    }

    /// Cuts the stream: the reader sees it cut, with `reason`.
    public func cancel(reason: String = "cancelled") { stream.cancel(reason: reason) }
}

/// A byte stream from a peer (`Session.acceptStream`): an `AsyncSequence` of the pieces as
/// they arrive, which ends when the writer finished it and throws `streamCut` when the
/// stream was cut instead (never a silent, short end). Its errors are typed
/// (`Failure == SyncpeerError`).
///
/// Reading suspends the calling task; no thread waits. Cancellation: a `read` (or the
/// iterator's `next`) whose task is cancelled while it waits throws `.cancelled` at once and
/// **leaves the stream as it was**: nothing was taken from it, and a later read goes on where
/// this one would have. `cancel(reason:)` is what cuts it.
public final class InputByteStream: AsyncSequence, Sendable {
    public typealias Element = Data
    public typealias Failure = SyncpeerError
    let stream: IncomingByteStream
    init(_ stream: IncomingByteStream) { self.stream = stream }

    public var name: String { stream.name }
    public var peer: PeerID { PeerID(stream.peer) }
    /// Bytes read so far.
    public var bytesRead: Int64 { stream.bytesRead }

    /// The next piece, nil at the end of a complete stream.
    public func read() async throws(SyncpeerError) -> Data? {
        while true {
            let poll: IncomingByteStream.Poll
            do throws(EngineError) { poll = try stream.poll() } catch { throw SyncpeerError(error) }
            switch poll {
            case let .piece(bytes):
                return Data(bytes)
            case .complete:
                return nil
            case .empty:
                let news = OneShot<Void>()
                stream.whenReadable { news.resolve(.success(())) }
                try await news.value()
            }
        }
    }

    /// Stops reading: the writer sees the stream cut.
    public func cancel(reason: String = "cancelled") { stream.cancel(reason: reason) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = SyncpeerError
        let stream: InputByteStream

        public mutating func next() async throws(SyncpeerError) -> Data? { try await stream.read() }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(SyncpeerError) -> Data? {
            try await stream.read()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }
}
