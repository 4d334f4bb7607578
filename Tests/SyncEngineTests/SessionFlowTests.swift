import Foundation
import PeerCrypto
import PeerFiles
import PeerNet
import PeerWire
@testable import SyncEngine
import Testing

/// The stall check tells a peer that stopped reading from one that reads a long answer
/// slowly: writes completed within a send count as progress.
@Suite struct SessionFlowTests {
    /// What the reader stops at (`maxUnhandledBytes`) counts the bulky frames by their
    /// content: small files' content with the index (a frame of 1 MiB counted 64 bytes
    /// before, and 64 such frames, 64 MiB, could wait for the node), tiny blocks with their
    /// arrays' overhead.
    @Test func framesOfContentCountWhatTheyHold() {
        let page = Array(repeating: Array(repeating: UInt8(1), count: 4_096), count: 256)
        #expect(SessionFlow.size(of: .indexBlocks(folder: "f", blocks: page)) >= 256 * 4_096)
        let tiny = Array(repeating: [UInt8(1)], count: 10_000)
        #expect(SessionFlow.size(of: .indexBlocks(folder: "f", blocks: tiny)) >= 10_000 * 64)
        #expect(SessionFlow.size(of: .blockResponse(request: 1, ok: true, data: Array(repeating: 0, count: 4_096))) >= 4_096)
    }

    @Test func writesWithinALongSendKeepTheStallCheckQuiet() throws {
        let flow = SessionFlow()
        flow.queue(SessionFlow.highWater + 1)  // one large answer waits to be sent
        let waiter = Thread { _ = flow.waitForRoom() }
        waiter.start()
        defer { flow.cancel() }
        let paused = ContinuousClock.now
        while !flow.isPaused && ContinuousClock.now - paused < .seconds(10) { Thread.sleep(forTimeInterval: 0.01) }
        #expect(flow.isPaused, "the reader waits for room")
        let limit = Duration.seconds(1)
        let start = ContinuousClock.now
        // Writes keep landing (as a slow link drains a 16 MiB answer) for twice the limit.
        while ContinuousClock.now - start < limit * 2 {
            Thread.sleep(forTimeInterval: 0.05)
            flow.wrote()
            #expect(flow.stallReason(pausedFor: limit) == nil, "a peer that reads slowly is not stalled")
        }
        // Then no write completes for longer than the limit: that peer stopped reading.
        Thread.sleep(forTimeInterval: 1.3)
        let reason = try #require(flow.stallReason(pausedFor: limit))
        #expect(reason.contains("stopped reading"))
    }
}

/// The same through a session over a real TCP connection: a 12 MiB block answer drained
/// slowly by the peer keeps the session's stall check quiet, because the session reports
/// its channel's writes to its flow.
@Suite struct SessionStallTests {
    /// Runs `body` on a thread of its own; `value()` waits for its result.
    final class Async<T: Sendable>: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var result: Result<T, any Error>?
        init(_ body: @escaping @Sendable () throws -> T) {
            Thread.detachNewThread { [self] in
                result = Result { try body() }
                done.signal()
            }
        }
        func value() throws -> T {
            done.wait()
            return try result!.get()
        }
    }

    @Test func aSlowlyReadLargeAnswerIsNotAStalledPeer() throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        let accepted = Async { try listener.accept() }
        let dialled = try TCPConnection.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(10))
        let server = try accepted.value()
        let hello = Hello(displayName: "t", softwareVersion: "test")
        let responder = Async { try SecureChannel.respond(over: server, staticKey: .generate(), hello: hello) }
        let channel = try SecureChannel.initiate(over: dialled, staticKey: .generate(), hello: hello)
        let peer = try responder.value()
        defer { channel.close(); peer.close() }

        let session = Session(id: 1, channel: channel, role: .initiator, dialAddress: nil)
        let count = 12 << 20   // over the 8 MiB high water: the reader pauses
        session.sendBlockFromAnyThread(request: 1, count: count) { buffer throws(FileError) in
            buffer.initializeMemory(as: UInt8.self, repeating: 3)
        }
        let waiter = Thread { _ = session.flow.waitForRoom() }
        waiter.start()
        defer { session.flow.cancel() }
        // The peer drains the bytes under its channel at about 4 MiB/s: three seconds.
        let reader = Async { () throws -> Int in
            var total = 0
            let start = ContinuousClock.now
            while total < count {
                let bytes = try server.read(maxCount: 64 * 1024, deadline: .now + .seconds(30))
                if bytes.isEmpty { break }
                total += bytes.count
                let due = start + .milliseconds(total / (4 << 10))
                let wait = due - .now
                if wait > .zero {
                    Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
                }
            }
            return total
        }
        let limit = Duration.seconds(1)
        let start = ContinuousClock.now
        var quietChecks = 0
        while ContinuousClock.now - start < .milliseconds(2_500) {
            Thread.sleep(forTimeInterval: 0.1)
            if session.flow.isPaused {
                quietChecks += 1
                #expect(session.flow.stallReason(pausedFor: limit) == nil, "a peer reading slowly is not stalled")
            }
        }
        #expect(quietChecks > 10, "the reader waited for room while the answer went out")
        #expect(try reader.value() >= count)
    }
}
