import Foundation
import PeerNet

/// A loopback TCP proxy that forwards bytes both ways between its clients and one target
/// port, and that can be armed to corrupt one byte of what a client sends next (the
/// client → target direction), like a tampering router in the middle.
///
/// Every connection accepted on `port` (127.0.0.1 only) is joined to a new connection to
/// 127.0.0.1:`targetPort`; one thread per direction copies bytes as they arrive.
final class ByteFlipProxy: @unchecked Sendable {
    // @unchecked: `armedMinimum`, `flips`, `connections` and `stopped` are guarded by `lock`;
    // the rest is immutable.
    let listener: TCPListener
    let targetPort: UInt16
    private let lock = NSLock()
    /// When set, the next client → target chunk of at least this many bytes gets a byte flipped.
    private var armedMinimum: Int?
    private var flips: [(size: Int, offset: Int)] = []
    private var connections: [TCPConnection] = []
    private var stopped = false
    /// Microseconds each forwarded chunk waits (a slow link), 0 for none.
    private var pause: UInt32 = 0

    var port: UInt16 { listener.port }
    var address: String { "127.0.0.1:\(port)" }

    /// `port` 0 picks a free one; another opens a route at an address a peer already dials.
    init(targetPort: UInt16, port: UInt16 = 0) throws {
        self.targetPort = targetPort
        listener = try TCPListener(host: "127.0.0.1", port: port)
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "flip-proxy-accept"
        thread.start()
    }

    /// Flips one byte in the middle of the next client → target chunk that holds at least
    /// `minimumChunk` bytes (smaller chunks, such as keepalive pings, pass untouched). The
    /// middle of a chunk is never in the 2-byte length prefix of a Noise message of more
    /// than 4 bytes, so the damage lands in a ciphertext or its tag.
    func arm(minimumChunk: Int) {
        lock.withLock { armedMinimum = minimumChunk }
    }

    /// Makes the link slow: every forwarded chunk (up to 64 KiB) waits this long first.
    func slowDown(microsecondsPerChunk: UInt32) {
        lock.withLock { pause = microsecondsPerChunk }
    }

    /// The chunks corrupted so far: their sizes and the offset of the flipped byte.
    var flipped: [(size: Int, offset: Int)] { lock.withLock { flips } }

    /// Closes every open connection (a cut link) but keeps accepting new ones.
    func cutConnections() {
        let open: [TCPConnection] = lock.withLock {
            defer { connections = [] }
            return connections
        }
        for connection in open { connection.close() }
    }

    /// Stops accepting and closes every connection. Idempotent.
    func stop() {
        let open: [TCPConnection] = lock.withLock {
            stopped = true
            defer { connections = [] }
            return connections
        }
        listener.close()
        for connection in open { connection.close() }
    }

    deinit { stop() }

    private func acceptLoop() {
        while true {
            let client: TCPConnection
            do { client = try listener.accept() } catch {
                if lock.withLock({ stopped }) { return }
                if case .closed = error { return }
                continue
            }
            let upstream: TCPConnection
            do {
                upstream = try TCPConnection.connect(host: "127.0.0.1", port: targetPort, timeout: .seconds(5))
            } catch {
                client.close()
                continue
            }
            let keep = lock.withLock { () -> Bool in
                if stopped { return false }
                connections += [client, upstream]
                return true
            }
            guard keep else {
                client.close()
                upstream.close()
                continue
            }
            let pair = Pair(client: client, upstream: upstream)
            start("flip-proxy-up") { [self] in pump(from: client, to: upstream, tamper: true, pair: pair) }
            start("flip-proxy-down") { [self] in pump(from: upstream, to: client, tamper: false, pair: pair) }
        }
    }

    private func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.name = name
        thread.start()
    }

    /// Copies `from` → `to` until the end of the stream (passed on as a half-close) or an
    /// error (both connections are closed).
    private func pump(from: TCPConnection, to: TCPConnection, tamper: Bool, pair: Pair) {
        while true {
            var chunk: [UInt8]
            do {
                chunk = try from.read(maxCount: 64 * 1024, deadline: nil)
            } catch {
                pair.closeBoth()
                return
            }
            if chunk.isEmpty {
                to.shutdownWrite()
                pair.directionEnded()
                return
            }
            if tamper { corruptIfArmed(&chunk) }
            let wait = lock.withLock { pause }
            if wait > 0 { usleep(wait) }
            do {
                try to.write(chunk)
            } catch {
                pair.closeBoth()
                return
            }
        }
    }

    private func corruptIfArmed(_ chunk: inout [UInt8]) {
        lock.withLock {
            guard let minimum = armedMinimum, chunk.count >= minimum else { return }
            armedMinimum = nil
            let offset = chunk.count / 2
            chunk[offset] ^= 0x5A
            flips.append((chunk.count, offset))
        }
    }

    /// The two connections of one proxied session; closed for good when both directions ended.
    final class Pair: @unchecked Sendable {
        // @unchecked: `ended` is guarded by `lock`.
        let client: TCPConnection
        let upstream: TCPConnection
        private let lock = NSLock()
        private var ended = 0

        init(client: TCPConnection, upstream: TCPConnection) {
            self.client = client
            self.upstream = upstream
        }

        func directionEnded() {
            let both = lock.withLock { () -> Bool in
                ended += 1
                return ended == 2
            }
            if both { closeBoth() }
        }

        func closeBoth() {
            client.close()
            upstream.close()
        }
    }
}
