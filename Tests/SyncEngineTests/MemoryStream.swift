import Foundation
import PeerNet

/// An in-memory duplex byte channel: two `ByteStream` ends, what one writes the other
/// reads, in order: a socket pair without a kernel (like swift-nio's `EmbeddedChannel`).
/// A write blocks while `capacity` bytes wait unread in its direction (a socket's buffer),
/// so a slow reader holds a fast writer back as over TCP. `shutdownWrite` ends one
/// direction; `close` on either end ends both (the other end reads the end of the stream,
/// its writes fail). `bytesWritten` counts what went each way, for tests that check traffic.
final class MemoryStream: ByteStream, @unchecked Sendable {
    // @unchecked: each pipe's fields are guarded by its condition; the rest is immutable.

    /// One direction: the bytes written and not read yet.
    final class Pipe: @unchecked Sendable {
        // @unchecked: every field but `capacity` is read and written with `condition` held.
        let condition = NSCondition()
        let capacity: Int
        var bytes: [UInt8] = []
        var head = 0
        var ended = false
        var total = 0

        init(capacity: Int) { self.capacity = capacity }

        var unread: Int { bytes.count - head }
    }

    private let inbound: Pipe
    private let outbound: Pipe
    /// Serialises writers: a write that waits for room keeps its bytes together.
    private let writing = NSLock()
    let remoteDescription: String

    private init(inbound: Pipe, outbound: Pipe, remote: String) {
        self.inbound = inbound
        self.outbound = outbound
        remoteDescription = remote
    }

    /// The two ends; `capacity` bytes may wait unread in each direction.
    static func pair(capacity: Int = 256 * 1024, names: (String, String) = ("memory-a", "memory-b")) -> (MemoryStream, MemoryStream) {
        let there = Pipe(capacity: capacity)
        let back = Pipe(capacity: capacity)
        return (MemoryStream(inbound: back, outbound: there, remote: names.1),
                MemoryStream(inbound: there, outbound: back, remote: names.0))
    }

    /// What this end wrote so far.
    var bytesWritten: Int {
        outbound.condition.lock()
        defer { outbound.condition.unlock() }
        return outbound.total
    }

    func read(maxCount: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8] {
        let pipe = inbound
        pipe.condition.lock()
        defer { pipe.condition.unlock() }
        while pipe.unread == 0 && !pipe.ended {
            if let deadline {
                let left = deadline - .now
                guard left > .zero else { throw .timedOut("reading from \(remoteDescription)") }
                let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
                _ = pipe.condition.wait(until: Date(timeIntervalSinceNow: seconds))
            } else {
                pipe.condition.wait()
            }
        }
        let count = min(maxCount, pipe.unread)
        let taken = Array(pipe.bytes[pipe.head..<(pipe.head + count)])
        pipe.head += count
        if pipe.unread == 0 {
            pipe.bytes.removeAll(keepingCapacity: true)
            pipe.head = 0
        }
        pipe.condition.broadcast()
        return taken
    }

    func write(_ bytes: [UInt8]) throws(NetError) {
        writing.lock()
        defer { writing.unlock() }
        let pipe = outbound
        pipe.condition.lock()
        defer { pipe.condition.unlock() }
        var offset = 0
        while offset < bytes.count {
            guard !pipe.ended else { throw .closed("\(remoteDescription) closed the in-memory channel") }
            let room = pipe.capacity - pipe.unread
            guard room > 0 else {
                pipe.condition.wait()
                continue
            }
            let count = min(room, bytes.count - offset)
            pipe.bytes.append(contentsOf: bytes[offset..<(offset + count)])
            pipe.total += count
            offset += count
            pipe.condition.broadcast()
        }
    }

    func shutdownWrite() {
        Self.end(outbound, discarding: false)
    }

    func close() {
        Self.end(outbound, discarding: false)
        Self.end(inbound, discarding: true)
    }

    private static func end(_ pipe: Pipe, discarding: Bool) {
        pipe.condition.lock()
        pipe.ended = true
        if discarding {
            pipe.bytes = []
            pipe.head = 0
        }
        pipe.condition.broadcast()
        pipe.condition.unlock()
    }
}
