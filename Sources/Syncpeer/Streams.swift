public import Foundation
internal import SyncEngine

/// A byte stream to a peer (`Session.startStream`; Multipeer Connectivity's `OutputStream`).
/// `write` blocks while the peer's reader has no room (back-pressure); a stream cut by the
/// peer or by the end of the session throws. `finish()` completes it; `cancel` cuts it.
public final class OutputByteStream: Sendable {
    let stream: OutgoingByteStream
    init(_ stream: OutgoingByteStream) { self.stream = stream }

    public var name: String { stream.name }
    public var peer: PeerID { PeerID(stream.peer) }
    /// Bytes written so far.
    public var bytesWritten: Int64 { stream.bytesWritten }

    public func write(_ data: Data) throws(SyncpeerError) {
        do throws(EngineError) { try stream.write(Array(data)) } catch { throw SyncpeerError(error) }
    }

    /// Ends the stream: the reader sees it complete.
    public func finish() throws(SyncpeerError) {
        do throws(EngineError) { try stream.finish() } catch { throw SyncpeerError(error) }
    }

    /// Cuts the stream: the reader sees it cut, with `reason`.
    public func cancel(reason: String = "cancelled") { stream.cancel(reason: reason) }
}

/// A byte stream from a peer (`Session.acceptStream`): an `AsyncSequence` of the pieces
/// as they arrive, which ends when the writer finished it and throws `streamCut` when the
/// stream was cut instead (never a silent, short end).
public final class InputByteStream: AsyncSequence, Sendable {
    public typealias Element = Data
    let stream: IncomingByteStream
    init(_ stream: IncomingByteStream) { self.stream = stream }

    public var name: String { stream.name }
    public var peer: PeerID { PeerID(stream.peer) }
    /// Bytes read so far.
    public var bytesRead: Int64 { stream.bytesRead }

    /// The next piece, nil at the end of a complete stream (blocks the calling thread).
    public func read() throws(SyncpeerError) -> Data? {
        do throws(EngineError) { return try stream.next().map { Data($0) } } catch { throw SyncpeerError(error) }
    }

    /// Stops reading: the writer sees the stream cut.
    public func cancel(reason: String = "cancelled") { stream.cancel(reason: reason) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: InputByteStream
        public mutating func next() async throws -> Data? {
            let stream = self.stream
            let result: Result<Data?, SyncpeerError> = await withCheckedContinuation { continuation in
                Thread.detachNewThread {
                    do throws(SyncpeerError) { continuation.resume(returning: .success(try stream.read())) } catch {
                        continuation.resume(returning: .failure(error))
                    }
                }
            }
            return try result.get()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }
}
