import Foundation
import PeerNet
import Synchronization

/// A test waited too long for a background thread: the operation under test hung.
struct Hung: Error, CustomStringConvertible {
    var description: String
}

/// Runs `body` on a thread of its own: the blocking socket calls must not occupy the
/// Swift concurrency pool (one thread per core), and a hang becomes a failure in `join`.
final class Background<T: Sendable>: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let outcome = Mutex<Result<T, any Error>?>(nil)

    init(_ body: @escaping @Sendable () throws -> T) {
        let thread = Thread { [self] in
            let result = Result { try body() }
            outcome.withLock { $0 = result }
            done.signal()
        }
        thread.start()
    }

    /// The value `body` returned (or rethrows its error). Throws `Hung` after `seconds`.
    func join(within seconds: Double = 60) throws -> T {
        guard done.wait(timeout: .now() + seconds) == .success else {
            throw Hung(description: "background operation did not finish within \(seconds) s")
        }
        return try outcome.withLock { $0! }.get()
    }
}

/// The `NetError` that `body` throws, or nil if it succeeds. (Closures do not infer a
/// typed `throws`, hence the cast.)
func netError<T>(_ body: () throws -> T) -> NetError? {
    do {
        _ = try body()
        return nil
    } catch let error as NetError {
        return error
    } catch {
        return .system(operation: "test", reason: "unexpected error type: \(error)")
    }
}

/// A fresh private directory under /tmp (short paths: Unix socket paths are limited to
/// 107 bytes), removed after `body`.
func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let path = "/tmp/peernet-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false,
                                            attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

/// Bytes that differ at every position (a repeating pattern would hide reordering).
func patternBytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var bytes = [UInt8](repeating: 0, count: count)
    for i in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        bytes[i] = UInt8(truncatingIfNeeded: state)
    }
    return bytes
}

/// Reads until the end of the stream.
func readAll(_ stream: any ByteStream, chunk: Int = 64 * 1024) throws(NetError) -> [UInt8] {
    var all: [UInt8] = []
    while true {
        let bytes = try stream.read(maxCount: chunk, deadline: nil)
        if bytes.isEmpty { return all }
        all.append(contentsOf: bytes)
    }
}

/// A listener on 127.0.0.1 (any free port) and a connected pair: (client, server side).
func loopbackPair() throws -> (listener: TCPListener, client: TCPConnection, server: TCPConnection) {
    let listener = try TCPListener(host: "127.0.0.1", port: 0)
    let accepted = Background { try listener.accept() }
    let client = try TCPConnection.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(10))
    let server = try accepted.join()
    return (listener, client, server)
}
