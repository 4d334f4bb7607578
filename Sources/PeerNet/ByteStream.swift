/// PeerNet: TCP and Unix-domain sockets, the Noise secure channel and (later) discovery.
/// Blocking POSIX I/O with deadlines, meant to run on dedicated threads (never on the
/// Swift concurrency pool, which has one thread per core here).

/// A reliable, ordered, two-way byte stream: a TCP or Unix-domain socket.
/// One reader and any number of writers may use it at once (writes are serialised).
package protocol ByteStream: AnyObject, Sendable {
    /// Reads at most `maxCount` bytes, blocking until some arrive. Returns an empty array at
    /// the end of the stream. Throws `NetError.timedOut` when `deadline` passes first.
    func read(maxCount: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8]
    /// Reads at most `buffer.count` (> 0) bytes into `buffer`, like `read(maxCount:deadline:)`;
    /// returns how many, 0 at the end of the stream.
    func read(into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant?) throws(NetError) -> Int
    /// Writes every byte or throws (`NetError.closed` when the peer has gone).
    func write(_ bytes: [UInt8]) throws(NetError)
    /// Writes every byte of `bytes` or throws, like `write(_:)`, without an array.
    func write(_ bytes: UnsafeRawBufferPointer) throws(NetError)
    /// Stops further sending; the peer reads end of stream.
    func shutdownWrite()
    /// Closes both directions and releases the descriptor. Idempotent; wakes a blocked reader.
    func close()
    /// The remote address as "host:port" (TCP) or a path (Unix), for logs and events.
    var remoteDescription: String { get }
}

extension ByteStream {
    /// Copies from `read(maxCount:deadline:)` for streams that only implement that one.
    package func read(into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant?) throws(NetError) -> Int {
        let bytes = try read(maxCount: buffer.count, deadline: deadline)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        return bytes.count
    }

    /// Copies the bytes into an array for streams that only implement `write(_: [UInt8])`.
    package func write(_ bytes: UnsafeRawBufferPointer) throws(NetError) {
        try write(Array(bytes))
    }
}

/// Errors of the network layer, each one line a user can read.
package enum NetError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The deadline passed.
    case timedOut(String)
    /// The peer closed the connection (or it was reset).
    case closed(String)
    /// Nothing listens at the address, or it cannot be reached.
    case unreachable(address: String, reason: String)
    /// A host:port or path is malformed.
    case invalidAddress(String)
    /// A system call failed.
    case system(operation: String, reason: String)
    /// The Noise handshake failed (bad message, wrong keys, wrong protocol).
    case handshakeFailed(String)
    /// A transport message did not authenticate: it was modified in transit.
    case authenticationFailed
    /// The peer sent something the protocol forbids (bad frame, over a limit).
    case protocolViolation(String)

    package var description: String {
        switch self {
        case let .timedOut(what): return "timed out: \(what)"
        case let .closed(what): return "connection closed: \(what)"
        case let .unreachable(address, reason): return "cannot reach \(address): \(reason)"
        case let .invalidAddress(why): return "invalid address: \(why)"
        case let .system(operation, reason): return "\(operation) failed: \(reason)"
        case let .handshakeFailed(why): return "secure handshake failed: \(why)"
        case .authenticationFailed: return "authentication failed: data was modified in transit; the connection was closed"
        case let .protocolViolation(why): return "protocol violation: \(why)"
        }
    }
}
