import Dispatch
import Foundation
import PeerCrypto
import PeerFiles
import PeerIndex
import PeerWire
@testable import SyncEngine
import Synchronization
import Testing

/// `StreamService` on its own: two services, each on its queue with an in-memory index,
/// joined by an in-memory `PeerLink` (frames one sends reach the other's `frameReceived` on
/// its queue, in order). No node, no sockets, no processes.
@Suite struct StreamServiceTests {
    /// One side: its service and what it sent.
    final class End: PeerLink {
        let name: String
        let peer: PeerRef
        let queue: DispatchQueue
        let isInitiator: Bool
        let events = EventLog()
        let sent = Mutex<[Frame]>([])
        /// The other end's service (set once both exist).
        let other = Mutex<StreamService?>(nil)
        private let built = Mutex<StreamService?>(nil)
        var service: StreamService { built.withLock { $0! } }

        init(name: String, isInitiator: Bool, invitationTimeout: Duration) throws {
            self.name = name
            self.isInitiator = isInitiator
            peer = PeerRef(id: DeviceID(publicKey: KeyPair.generate().publicKey), name: name)
            queue = DispatchQueue(label: "test.streams.\(name)")
            var config = NodeConfig()
            config.invitationTimeout = invitationTimeout
            let service = StreamService(queue: queue, link: self, store: try NodeIndex.inMemory(), events: events, config: config)
            built.withLock { $0 = service }
        }

        // PeerLink: one session (ID 1) to the other end.
        func session(_ id: UInt64) -> LinkSession? { nil }
        func connectedSession(device deviceKey: String) -> LinkSession? { nil }
        func connectedSessions() -> [LinkSession] { [] }
        func send(_ frames: [Frame], on id: UInt64) {
            sent.withLock { $0 += frames }
            guard let other = other.withLock({ $0 }) else { return }
            other.queue.async {
                for frame in frames { _ = other.frameReceived(frame, on: id) }
            }
        }

        /// The session to `peer` as the service sees it.
        func link(to peer: PeerRef) -> LinkSession {
            LinkSession(id: 1, deviceKey: peer.id.compact, peer: peer, isConnected: true, chunks: NoChunks(),
                        flow: FlowCount(), frames: NoFrames())
        }
    }

    struct NoChunks: ChunkSink {
        func writeChunk(id: TransferID, index: UInt32, hash: [UInt8]?, count: Int,
                        fill: (UnsafeMutableRawBufferPointer, Int) throws(FileError) -> Void) -> FileError? { nil }
    }

    struct NoFrames: FrameSender {
        func sendFromAnyThread(_ frames: [Frame]) {}
        func afterQueuedSends(_ body: @escaping @Sendable () -> Void) { body() }
        func sendBlockFromAnyThread(request: UInt32, count: Int,
                                    fill: @escaping @Sendable (UnsafeMutableRawBufferPointer) throws(FileError) -> Void) {}
    }

    /// Alice (the session's initiator) and bob, connected.
    static func pair(invitationTimeout: Duration = .seconds(30)) throws -> (alice: End, bob: End) {
        let alice = try End(name: "alice", isInitiator: true, invitationTimeout: invitationTimeout)
        let bob = try End(name: "bob", isInitiator: false, invitationTimeout: invitationTimeout)
        alice.other.withLock { $0 = bob.service }
        bob.other.withLock { $0 = alice.service }
        alice.queue.sync { alice.service.sessionConnected(alice.link(to: bob.peer), isInitiator: true) }
        bob.queue.sync { bob.service.sessionConnected(bob.link(to: alice.peer), isInitiator: false) }
        return (alice, bob)
    }

    static func open(_ name: String, from end: End, to peer: PeerRef) throws -> OutgoingByteStream {
        let opened: Result<OutgoingByteStream, EngineError> = end.queue.sync {
            Result { () throws(EngineError) in try end.service.open(named: name, on: end.link(to: peer)) }
        }
        return try opened.get()
    }

    /// Registers a waiter on `end`; what it was handed, if anything.
    static func waitForStream(on end: End) -> (id: UInt64, delivered: Delivered) {
        let delivered = Delivered()
        let id = end.queue.sync { end.service.awaitStream(from: nil) { stream in delivered.stream.withLock { $0 = stream } } }
        return (id, delivered)
    }

    /// What a waiter was handed.
    final class Delivered: Sendable {
        let stream = Mutex<IncomingByteStream?>(nil)
    }

    static func waitUntil(_ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return false
    }

    /// A stream opened before anyone waited is kept, then handed to the first waiter; more
    /// bytes than one window arrive in order (the reader grants credit back as it takes) and
    /// the stream ends complete.
    @Test func aStreamWaitsForItsConsumerAndArrivesWholeAndComplete() throws {
        let (alice, bob) = try Self.pair()
        let writer = try Self.open("notes", from: alice, to: bob.peer)
        // The open and bob's first credit have crossed: bob holds the stream, unclaimed.
        #expect(Self.waitUntil { alice.sent.withLock { !$0.isEmpty } && bob.sent.withLock { $0.contains { $0.type == .streamCredit } } })
        let (_, delivered) = Self.waitForStream(on: bob)
        let reader = try #require(delivered.stream.withLock { $0 }, "the waiting stream was not handed to the waiter")
        #expect(reader.name == "notes" && reader.peer.id == alice.peer.id)

        let bytes = (0..<(StreamTable.window * 2 + 12_345)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let written = Mutex<EngineError?>(nil)
        let thread = Thread {
            do throws(EngineError) {
                try writer.write(bytes)
                try writer.finish()
            } catch { written.withLock { $0 = error } }
        }
        thread.start()
        var received: [UInt8] = []
        while let piece = try reader.next(timeout: .seconds(10)) { received += piece }
        #expect(written.withLock { $0 } == nil)
        #expect(received == bytes)
        #expect(reader.bytesRead == Int64(bytes.count) && writer.bytesWritten == Int64(bytes.count))
    }

    /// A stream nobody takes within the invitation timeout is reset, "nobody is receiving
    /// streams": its writer sees it cut, and a consumer that comes later does not get it.
    @Test func aStreamNobodyTakesIsResetAfterTheInvitationTimeout() throws {
        let (alice, bob) = try Self.pair(invitationTimeout: .milliseconds(500))
        let writer = try Self.open("unwanted", from: alice, to: bob.peer)
        #expect(Self.waitUntil { bob.sent.withLock { $0.contains { $0.type == .streamCredit } } })
        bob.queue.sync { bob.service.timerFired() }
        #expect(alice.queue.sync { writer.cutReason } == nil, "reset before its time")
        Thread.sleep(forTimeInterval: 0.6)
        bob.queue.sync { bob.service.timerFired() }
        #expect(Self.waitUntil { writer.cutReason != nil })
        #expect(writer.cutReason?.contains("nobody is receiving streams") == true, "\(writer.cutReason ?? "")")
        #expect(throws: EngineError.self) { try writer.write([1, 2, 3]) }
        let (id, delivered) = Self.waitForStream(on: bob)
        #expect(delivered.stream.withLock { $0 } == nil)
        #expect(bob.queue.sync { bob.service.withdraw(id) }, "the late waiter should still be waiting")
    }

    /// A peer that sends more than the credit it was granted breaks the stream rules: the
    /// service names the violation (the node ends the session with it); the writer's stream
    /// is cut when the session ends.
    @Test func dataBeyondTheCreditIsAViolationAndTheSessionsEndCutsTheStream() throws {
        let (alice, bob) = try Self.pair()
        let writer = try Self.open("flood", from: alice, to: bob.peer)
        #expect(Self.waitUntil { bob.sent.withLock { $0.contains { $0.type == .streamCredit } } })
        let violation = bob.queue.sync {
            bob.service.frameReceived(.streamData(id: 1, bytes: [UInt8](repeating: 0, count: StreamTable.window + 1)), on: 1)
        }
        #expect(violation?.contains("credit") == true, "\(violation ?? "no violation")")
        alice.queue.sync { alice.service.sessionClosed(1, reason: "protocol violation") }
        #expect(writer.cutReason == "protocol violation")
        // Frames of a session that ended are ignored.
        #expect(alice.queue.sync { alice.service.frameReceived(.streamCredit(id: 1, bytes: 10), on: 1) } == nil)
    }
}
