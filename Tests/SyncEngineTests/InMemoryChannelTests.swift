import Dispatch
import Foundation
import PeerCrypto
import PeerIndex
@testable import SyncEngine
import Synchronization
import Testing

/// Connections and transfers with no socket: each pair of ends is joined by an in-memory
/// byte channel (`MemoryStream`) handed to one end's `connect(over:)` and the other's
/// `accept(over:)`. Nothing listens; the Noise handshake, the session, pairing and the
/// transfer run exactly as over TCP.
@Suite(.serialized)
struct InMemoryChannelTests {
    typealias Peer = ConnectionServiceTests.Peer

    /// (ConnectionServiceTests pair, pin and decline over this channel too.)
    @Test func twoConnectionServicesPairOverAChannelAndItsEndEndsBothSessions() throws {
        let bob = try Peer("bob", listening: false) { $0.autoAccept = true }
        let alice = try Peer("alice", listening: false)
        defer { alice.service.stop(); bob.service.stop() }
        #expect(alice.address.isEmpty && bob.address.isEmpty)
        let (aliceEnd, bobEnd) = MemoryStream.pair()
        bob.service.accept(over: bobEnd)
        let paired = ConnectionServiceTests.Outcome()
        alice.service.connect(over: aliceEnd, expected: nil, context: nil, completion: { paired.set($0) })
        try Self.eventually("both ends connected") { alice.observer.connected == ["bob"] && bob.observer.connected == ["alice"] }
        guard case let .success(peer)? = paired.value else { Issue.record("pairing failed: \(String(describing: paired.value))"); return }
        #expect(peer.name == "bob")
        #expect(aliceEnd.bytesWritten > 0 && bobEnd.bytesWritten > 0)

        // The channel ends: both sessions end, as when a socket closes.
        aliceEnd.close()
        try Self.eventually("both sessions ended") { !alice.observer.ended.isEmpty && !bob.observer.ended.isEmpty }
        #expect(alice.onQueue { alice.service.connectedSession(device: bob.key) } == nil)
        #expect(bob.onQueue { bob.service.connectedSession(device: alice.key) } == nil)
    }

    /// Issue 42.2: a node that cannot read who is paired refuses a connection with the cause,
    /// rather than showing a paired peer's connection as an invitation from a stranger.
    @Test func aNodeThatCannotReadItsPeersRefusesWithTheCauseInsteadOfShowingAnInvitation() throws {
        let bob = try Peer("bob", listening: false) { $0.autoAccept = true }
        let alice = try Peer("alice", listening: false)
        defer { alice.service.stop(); bob.service.stop() }
        let (first, firstBob) = MemoryStream.pair()
        bob.service.accept(over: firstBob)
        alice.service.connect(over: first, expected: nil, context: nil, completion: nil)
        try Self.eventually("paired") { alice.observer.connected == ["bob"] && bob.observer.connected == ["alice"] }
        first.close()
        try Self.eventually("disconnected") { alice.observer.ended.count == 1 && bob.observer.ended.count == 1 }

        try IndexFailureTests.damage(bob.index, table: "peers")
        let (aliceEnd, bobEnd) = MemoryStream.pair()
        bob.service.accept(over: bobEnd)
        alice.service.connect(over: aliceEnd, expected: bob.key, context: nil, completion: nil)
        try Self.eventually("bob refuses with the cause") {
            bob.events.contains { if case let .refused(r) = $0 { r.reason.contains("no such table: peers") } else { false } }
        }
        #expect(bob.service.invitations().isEmpty)
        try Self.eventually("alice's session ended") { alice.observer.ended.count >= 2 }
    }

    @Test func aFileIsSentBetweenTwoNodesOverAnInMemoryChannel() throws {
        let bob = try MemoryNode("bob") { $0.autoAccept = true }
        let alice = try MemoryNode("alice")
        defer {
            alice.node.stop()
            bob.node.stop()
            try? FileManager.default.removeItem(atPath: alice.directory)
            try? FileManager.default.removeItem(atPath: bob.directory)
        }
        let aliceEnd = try Self.join(alice, bob, expected: nil)

        // Several chunks' worth, so the window and the acknowledgements are exercised.
        let source = alice.directory + "/photo.bin"
        try TransferPair.randomFile(source, size: 700_000, seed: 42)
        let result = Mutex<Result<TransferInfo, EngineError>?>(nil)
        alice.node.send(path: source, to: "bob", name: nil, spoolFile: nil, observer: { _ in },
                        completion: { outcome in result.withLock { $0 = outcome } })
        try Self.eventually("the send finished", timeout: 30) { result.withLock { $0 } != nil }
        let info = try result.withLock { $0 }!.get()
        #expect(info.state == .completed)
        let received = bob.receiveDirectory + "/photo.bin"
        #expect(FileManager.default.contents(atPath: received) == FileManager.default.contents(atPath: source))
        // Every byte crossed the in-memory channel (nothing listened anywhere).
        #expect(aliceEnd.bytesWritten > 700_000)
    }

    @Test func aChannelCutMidTransferResumesOnTheNextWithoutSendingAgainWhatArrived() throws {
        let size = 2_000_000
        let bob = try MemoryNode("bob") { $0.autoAccept = true }
        // Paced, so that the channel is cut half-way through.
        let alice = try MemoryNode("alice") { $0.sendRateBytesPerSecond = 1_000_000 }
        defer {
            alice.node.stop()
            bob.node.stop()
            try? FileManager.default.removeItem(atPath: alice.directory)
            try? FileManager.default.removeItem(atPath: bob.directory)
        }
        let first = try Self.join(alice, bob, expected: nil)
        let source = alice.directory + "/video.bin"
        try TransferPair.randomFile(source, size: size, seed: 7)
        let result = Mutex<Result<TransferInfo, EngineError>?>(nil)
        alice.node.send(path: source, to: "bob", name: nil, spoolFile: nil, observer: { _ in },
                        completion: { outcome in result.withLock { $0 = outcome } })
        try Self.eventually("half of it sent", timeout: 30) { first.bytesWritten > size / 2 }
        first.close()
        try Self.eventually("both ends lost the session") { !alice.connected(to: bob) && !bob.connected(to: alice) }
        #expect(result.withLock { $0 } == nil, "a lost channel pauses the send; it does not end it")

        // A new channel between the paired nodes: the send is offered again and resumed.
        let second = try Self.join(alice, bob, expected: bob.key)
        try Self.eventually("the send finished", timeout: 30) { result.withLock { $0 } != nil }
        #expect(try result.withLock { $0 }!.get().state == .completed)
        #expect(FileManager.default.contents(atPath: bob.receiveDirectory + "/video.bin") == FileManager.default.contents(atPath: source))
        // What arrived before the cut (all but what was still in the channel) was not sent again.
        #expect(second.bytesWritten < size - size / 4, "\(second.bytesWritten) bytes after the cut")
    }

    /// Joins `alice` (dialling) and `bob` (accepting) by a new in-memory channel and waits
    /// until both are connected; returns alice's end.
    static func join(_ alice: MemoryNode, _ bob: MemoryNode, expected: String?) throws -> MemoryStream {
        let (aliceEnd, bobEnd) = MemoryStream.pair()
        bob.node.connections.accept(over: bobEnd)
        let joined = ConnectionServiceTests.Outcome()
        alice.node.connections.connect(over: aliceEnd, expected: expected, context: nil, completion: { joined.set($0) })
        try eventually("connected") { alice.connected(to: bob) && bob.connected(to: alice) }
        return aliceEnd
    }

    /// A node with an in-memory index in a temporary home, not listening, discovery off.
    final class MemoryNode: Sendable {
        let node: Node
        let directory: String
        let receiveDirectory: String
        let key: String

        init(_ name: String, configure: (inout NodeConfig) -> Void = { _ in }) throws {
            directory = NSTemporaryDirectory() + "syncpeer-memory-\(name)-\(UUID().uuidString.prefix(8))"
            receiveDirectory = directory + "/in"
            try FileManager.default.createDirectory(atPath: receiveDirectory, withIntermediateDirectories: true)
            var config = NodeConfig()
            config.discovery = false
            config.receiveDirectory = receiveDirectory
            config.receiveDirectoryGiven = true
            configure(&config)
            let identity = try Identity(keyPair: KeyPair.generate(), displayName: name)
            key = identity.deviceID.compact
            node = Node(home: NodeHome(path: directory + "/home"), identity: identity, index: try NodeIndex.inMemory(), config: config)
            node.queue.sync { node.connections.startTimer() }
        }

        func connected(to other: MemoryNode) -> Bool {
            node.queue.sync { node.connections.connectedSession(device: other.key) != nil }
        }
    }

    static func eventually(_ what: String, timeout: Double = 15, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !condition() {
            guard Date() < deadline else { throw TransferPair.Timeout(what: what) }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }
}
