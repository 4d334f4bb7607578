import Foundation
import Glibc
import PeerCrypto
@testable import PeerNet
import PeerWire
import Synchronization
import Testing

/// A minimal `ByteStream` over one end of a `socketpair(AF_UNIX, SOCK_STREAM)`, for tests only
/// (the real sockets live elsewhere in PeerNet). Blocking reads with `poll` for the deadline,
/// `send` with `MSG_NOSIGNAL`; `close` shuts the socket down (waking a blocked reader) and the
/// descriptor is released when the object goes away, so it is never reused under a reader.
final class PairStream: ByteStream {
    private let fd: Int32
    private let closed = Atomic<Bool>(false)
    private let writeLock = Mutex<Void>(())
    let remoteDescription: String

    init(fd: Int32, name: String) {
        self.fd = fd
        self.remoteDescription = name
    }

    deinit { Glibc.close(fd) }

    /// Two connected streams.
    static func pair() -> (PairStream, PairStream) {
        var fds: [Int32] = [-1, -1]
        let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
        precondition(rc == 0, "socketpair failed: errno \(errno)")
        return (PairStream(fd: fds[0], name: "pair-a"), PairStream(fd: fds[1], name: "pair-b"))
    }

    func read(maxCount: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8] {
        while true {
            if closed.load(ordering: .acquiring) { throw .closed("stream closed locally") }
            if let deadline {
                let remaining = deadline - .now
                if remaining <= .zero { throw .timedOut("read") }
                let (seconds, attoseconds) = remaining.components
                let ms = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&pfd, 1, ms)
                if ready < 0 && errno == EINTR { continue }
                if ready < 0 { throw .system(operation: "poll", reason: String(cString: strerror(errno))) }
                if ready == 0 { continue }  // re-checks the deadline
            }
            var buffer = [UInt8](repeating: 0, count: maxCount)
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, maxCount) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET { throw .closed("connection reset") }
                throw .system(operation: "read", reason: String(cString: strerror(errno)))
            }
            buffer.removeSubrange(n...)
            return buffer
        }
    }

    func write(_ bytes: [UInt8]) throws(NetError) {
        try writeLock.withLock { _ throws(NetError) in
            var offset = 0
            while offset < bytes.count {
                if closed.load(ordering: .acquiring) { throw .closed("stream closed locally") }
                let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EPIPE || errno == ECONNRESET { throw .closed("peer has gone") }
                    throw .system(operation: "send", reason: String(cString: strerror(errno)))
                }
                offset += n
            }
        }
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    func close() {
        if closed.exchange(true, ordering: .acquiringAndReleasing) { return }
        shutdown(fd, Int32(SHUT_RDWR))
    }
}

struct TestTimeout: Error, CustomStringConvertible {
    var description: String { "a background thread did not finish in time (hang?)" }
}

/// Runs a blocking body on its own thread (never on the concurrency pool).
final class ChannelBackground<T: Sendable>: Sendable {
    private let result = Mutex<Result<T, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws -> T) {
        let thread = Thread { [self] in
            let outcome = Result { try body() }
            result.withLock { $0 = outcome }
            done.signal()
        }
        thread.start()
    }

    /// True once the body has returned or thrown.
    var isFinished: Bool { result.withLock { $0 != nil } }

    /// The body's result (or rethrows its error); throws `TestTimeout` rather than hang.
    func value(within seconds: Double = 60) throws -> T {
        guard done.wait(timeout: .now() + seconds) == .success else { throw TestTimeout() }
        done.signal()  // later calls return at once
        return try result.withLock { $0! }.get()
    }

    /// The NetError the body threw, or nil if it returned.
    func netError(within seconds: Double = 60) throws -> NetError? {
        do {
            _ = try value(within: seconds)
            return nil
        } catch let error as NetError {
            return error
        }
    }
}

/// The error a throwing expression raised as a NetError, or nil.
func netError<T>(_ body: () throws(NetError) -> T) -> NetError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

extension NetError {
    var isHandshakeFailed: Bool { if case .handshakeFailed = self { true } else { false } }
    var isClosed: Bool { if case .closed = self { true } else { false } }
    var isTimedOut: Bool { if case .timedOut = self { true } else { false } }
    var isProtocolViolation: Bool { if case .protocolViolation = self { true } else { false } }
}

let helloA = Hello(displayName: "Ann's laptop", softwareVersion: "syncpeer 0.1", features: ["resources"],
                   context: "folder “Photos”", listenPort: 22_000)
let helloB = Hello(displayName: "Bob", softwareVersion: "syncpeer 0.2", features: ["resources", "x-test"],
                   context: nil, listenPort: nil)

/// A completed handshake between two random identities over a socketpair.
struct ChannelPair {
    let initiator: SecureChannel
    let responder: SecureChannel
    let initiatorKey: KeyPair
    let responderKey: KeyPair
    /// The raw streams under the channels (to write bytes behind the channels' backs).
    let initiatorStream: PairStream
    let responderStream: PairStream

    static func make(rekeyInterval: UInt64 = 1 << 16, responderRekeyInterval: UInt64? = nil,
                     helloA: Hello = helloA, helloB: Hello = helloB) throws -> ChannelPair {
        let (a, b) = PairStream.pair()
        let keyA = KeyPair.generate(), keyB = KeyPair.generate()
        let responder = ChannelBackground {
            try SecureChannel.respond(over: b, staticKey: keyB, hello: helloB,
                                      rekeyInterval: responderRekeyInterval ?? rekeyInterval)
        }
        let initiator = try SecureChannel.initiate(over: a, staticKey: keyA, hello: helloA, rekeyInterval: rekeyInterval)
        return ChannelPair(initiator: initiator, responder: try responder.value(), initiatorKey: keyA,
                           responderKey: keyB, initiatorStream: a, responderStream: b)
    }

    /// Receives `count` frames at the responder on a thread of its own (fewer if it ends).
    func responderReceives(_ count: Int) -> ChannelBackground<[Frame]> {
        let responder = self.responder
        return ChannelBackground {
            var received: [Frame] = []
            while received.count < count, let frame = try responder.receive(deadline: .now + .seconds(60)) {
                received.append(frame)
            }
            return received
        }
    }
}

/// A man in the middle that copies bytes between two streams, one thread per direction,
/// flipping chosen bits on the way.
final class Relay: Sendable {
    /// Stream offsets (counted from the first byte of that direction) to XOR with a mask.
    struct Flips: Sendable {
        var initiatorToResponder: [Int: UInt8] = [:]
        var responderToInitiator: [Int: UInt8] = [:]
    }

    private let threads: [ChannelBackground<Void>]

    /// Connects `initiatorSide` (the relay's end of the initiator's pair) with `responderSide`.
    init(initiatorSide: PairStream, responderSide: PairStream, flips: Flips) {
        threads = [
            ChannelBackground { Relay.copy(from: initiatorSide, to: responderSide, flips: flips.initiatorToResponder) },
            ChannelBackground { Relay.copy(from: responderSide, to: initiatorSide, flips: flips.responderToInitiator) },
        ]
    }

    private static func copy(from source: PairStream, to destination: PairStream, flips: [Int: UInt8]) {
        var offset = 0
        while true {
            guard var bytes = try? source.read(maxCount: 4096, deadline: nil), !bytes.isEmpty else { break }
            for (position, mask) in flips where position >= offset && position < offset + bytes.count {
                bytes[position - offset] ^= mask
            }
            offset += bytes.count
            guard (try? destination.write(bytes)) != nil else { break }
        }
        destination.shutdownWrite()
    }

    /// Two socketpairs joined by a relay: the initiator's stream and the responder's.
    static func connect(flips: Flips) -> (initiator: PairStream, responder: PairStream, relay: Relay, ends: [PairStream]) {
        let (initiator, relayA) = PairStream.pair()
        let (relayB, responder) = PairStream.pair()
        let relay = Relay(initiatorSide: relayA, responderSide: relayB, flips: flips)
        return (initiator, responder, relay, [relayA, relayB])
    }
}

/// Deterministic test content.
func patternBytes(_ count: Int, seed: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    var x = UInt32(truncatingIfNeeded: seed &* 2_654_435_761 | 1)
    for i in 0..<count {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5
        bytes[i] = UInt8(truncatingIfNeeded: x)
    }
    return bytes
}
