import Dispatch
import Foundation
import PeerCrypto
import PeerIndex
import PeerNet
import PeerWire
@testable import SyncEngine
import Synchronization
import Testing

/// The connection service alone: two of them in this process over loopback TCP (or, where
/// the test takes a `Transport`, also over an in-memory channel, no socket), each with
/// an in-memory index, its own queue and a recording observer in place of the services
/// above the sessions (no node, no processes). What a user of `pair`, `invitations`,
/// `disconnect` and a restarted peer would check: who is paired, who is connected, what
/// reaches the layers above, and that a peer comes back by itself.
@Suite(.serialized)
struct ConnectionServiceTests {
    @Test(arguments: Transport.allCases)
    func anAcceptedInvitationPairsBothEndsAndFramesReachTheLayersAbove(_ transport: Transport) throws {
        let bob = try Peer("bob", listening: transport == .tcp) { $0.autoAccept = true }
        let alice = try Peer("alice", listening: transport == .tcp)
        defer { alice.service.stop(); bob.service.stop() }
        let paired = alice.invite(bob, over: transport)
        try eventually("alice's invitation answered") { paired.value != nil }
        guard case let .success(peer)? = paired.value else { Issue.record("pairing failed: \(String(describing: paired.value))"); return }
        #expect(peer.name == "bob")
        try eventually("both ends connected") { alice.observer.connected.count == 1 && bob.observer.connected.count == 1 }
        #expect(try alice.index.peer(deviceID: bob.key)?.trust == .paired)
        #expect(try bob.index.peer(deviceID: alice.key)?.trust == .paired)
        #expect(try alice.service.peerList().map(\.peer.name) == ["bob"])

        // A folder frame sent through the link reaches bob's observer, not the session.
        let sessionID = try #require(alice.onQueue { alice.service.connectedSession(device: bob.key)?.id })
        alice.onQueue { alice.service.send([.indexAck(folder: "f1", sequence: 7)], on: sessionID) }
        try eventually("the frame reaches bob's layers above") { bob.observer.frames.contains("indexAck(f1, 7)") }

        // A message is the connections' own: delivered as an event.
        _ = try alice.service.sendMessage(to: "bob", bytes: Array("hello".utf8), unreliable: false)
        try eventually("bob's message event") { bob.events.contains { if case let .message(m) = $0 { m.text == "hello" } else { false } } }
        #expect(bob.observer.timerBeats > 0)
    }

    @Test(arguments: Transport.allCases)
    func pairedPeersPinEachOthersCertificateIDAndRefuseOneNamingAnotherKey(_ transport: Transport) throws {
        let bob = try Peer("bob", listening: transport == .tcp) { $0.autoAccept = true }
        let alice = try Peer("alice", listening: transport == .tcp)
        defer { alice.service.stop(); bob.service.stop() }
        let paired = alice.invite(bob, over: transport)
        try eventually("alice's invitation answered") { paired.value != nil }
        // Each learns, inside the Noise session, what relays and discovery servers call the other.
        try eventually("both certificate IDs pinned") {
            try alice.index.peerCertificate(deviceID: bob.key) != nil && bob.index.peerCertificate(deviceID: alice.key) != nil
        }
        let aliceID = try TLSIdentity(keyPair: alice.identity.keyPair).id
        #expect(try alice.index.peerCertificate(deviceID: bob.key) == TLSIdentity(keyPair: bob.identity.keyPair).id.hash)
        #expect(try bob.index.peerCertificate(deviceID: alice.key) == aliceID.hash)

        // Alice (hostile now) sends a certificate of another key: bob ends the session and
        // keeps the ID he pinned.
        let other = try TLSIdentity(keyPair: .generate())
        alice.onQueue { alice.service.sessions.values.first?.send([.certificate(other.certificate)]) }
        try eventually("bob ended the session") { bob.observer.ended.contains { $0.contains("does not name the peer's key") } }
        #expect(try bob.index.peerCertificate(deviceID: alice.key) == aliceID.hash)
    }

    @Test(arguments: Transport.allCases)
    func aDeclinedInvitationPairsNobodyAndTellsTheInviter(_ transport: Transport) throws {
        let bob = try Peer("bob", listening: transport == .tcp)
        let alice = try Peer("alice", listening: transport == .tcp)
        defer { alice.service.stop(); bob.service.stop() }
        let paired = alice.invite(bob, over: transport)
        try eventually("bob's open invitation") { bob.service.invitations().count == 1 }
        let invitation = try #require(bob.service.invitations().first)
        #expect(invitation.peer.name == "alice")
        #expect(invitation.code == alice.onQueue { alice.service.sessions.values.first?.channel.shortAuthenticationString })
        _ = try bob.service.answer(invitation: invitation.invitation, accept: false)
        try eventually("alice told") { paired.value != nil }
        guard case let .failure(error)? = paired.value else { Issue.record("expected a refusal"); return }
        #expect("\(error)".contains("declined"))
        #expect(try alice.index.peer(deviceID: bob.key) == nil)
        #expect(try bob.index.peer(deviceID: alice.key) == nil)
        #expect(alice.observer.connected.isEmpty && bob.observer.connected.isEmpty)
    }

    @Test func anotherKeyAtAPairedPeersAddressIsRefused() throws {
        let bob = try Peer("bob") { $0.autoAccept = true }
        let alice = try Peer("alice")
        let mallory = try Peer("mallory") { $0.autoAccept = true }
        defer { alice.service.stop(); bob.service.stop(); mallory.service.stop() }
        // Alice expects bob's key but mallory answers at the address.
        let outcome = Outcome()
        alice.queue.async {
            alice.service.invite(address: mallory.address, expected: bob.key, context: nil, progress: { _ in },
                                 completion: { outcome.set($0) })
        }
        try eventually("the dial ends") { outcome.value != nil }
        guard case let .failure(error)? = outcome.value else { Issue.record("impersonation was not refused"); return }
        #expect("\(error)".contains("impersonation"))
        #expect(try alice.index.peer(deviceID: mallory.key) == nil)
        #expect(alice.observer.connected.isEmpty)
    }

    @Test func aPeerThatDisconnectsIsHeldOffAndAPeerThatRestartsIsRedialled() throws {
        let bob = try Peer("bob") { $0.autoAccept = true }
        let alice = try Peer("alice")
        defer { alice.service.stop() }
        let paired = alice.invite(bob)
        try eventually("paired") { alice.observer.connected.count == 1 && bob.observer.connected.count == 1 }
        #expect(paired.value != nil)

        // Bob restarts: the same identity, index and port; alice redials him by herself.
        bob.service.stop()
        try eventually("alice sees bob gone") { alice.observer.stillConnected.isEmpty }
        #expect(alice.observer.ended.last?.contains("shutting down") == true)
        let bob2 = try Peer(restarting: bob)
        defer { bob2.service.stop() }
        try eventually("alice reconnected to the restarted bob", timeout: 30) {
            alice.observer.stillConnected.count == 1 && bob2.observer.stillConnected.count == 1
        }
        let connections = alice.observer.connected.count

        // Bob disconnects on purpose: alice's discovery is told not to dial him again.
        _ = try bob2.service.disconnect(peer: "alice")
        try eventually("alice sees the disconnect") { alice.observer.stillConnected.isEmpty }
        #expect(alice.observer.ended.last?.contains("disconnected") == true)
        #expect(alice.nearby.heldOff.withLock { $0.contains(bob.key) })
        #expect(bob2.nearby.heldOff.withLock { $0.contains(alice.key) })
        Thread.sleep(forTimeInterval: 0.3)  // several redial periods: nobody dials
        #expect(alice.observer.connected.count == connections)
    }

    @Test func twoPeersThatDialEachOtherAtOnceKeepOneSessionBoth() throws {
        let bob = try Peer("bob") { $0.autoAccept = true }
        let alice = try Peer("alice")
        _ = alice.invite(bob)
        try eventually("paired") { alice.observer.connected.count == 1 && bob.observer.connected.count == 1 }
        alice.service.stop()
        bob.service.stop()
        // Both restart at once, and each dials the other at start (its stored address).
        let alice2 = try Peer(restarting: alice)
        let bob2 = try Peer(restarting: bob)
        defer { alice2.service.stop(); bob2.service.stop() }
        func liveSessions(_ peer: Peer) -> [UInt64] {
            peer.onQueue { peer.service.sessions.values.filter { $0.machine.state != .closed }.map(\.id).sorted() }
        }
        try eventually("connected again") {
            alice2.onQueue { alice2.service.connectedSession(device: bob.key) != nil }
                && bob2.onQueue { bob2.service.connectedSession(device: alice.key) != nil }
        }
        Thread.sleep(forTimeInterval: 0.5)  // a duplicate, if kept, would be closed or redialled by now
        #expect(liveSessions(alice2).count == 1)
        #expect(liveSessions(bob2).count == 1)
        // Whichever connection won, each end told the layers above of one connected session
        // that is still open (the loser, if it ever connected, was reported ended).
        #expect(alice2.observer.stillConnected == liveSessions(alice2))
        #expect(bob2.observer.stillConnected == liveSessions(bob2))
        // Ending the duplicate is not the user's disconnect: discovery may still dial.
        #expect(alice2.nearby.heldOff.withLock { $0.isEmpty })
        #expect(bob2.nearby.heldOff.withLock { $0.isEmpty })
    }

    // MARK: - Support

    final class Outcome: @unchecked Sendable {
        // @unchecked: `state` is a Mutex.
        private let state = Mutex<Result<PeerRef, EngineError>?>(nil)
        var value: Result<PeerRef, EngineError>? { state.withLock { $0 } }
        func set(_ result: Result<PeerRef, EngineError>) { state.withLock { $0 = result } }
    }

    /// How two services are joined: loopback TCP, or an in-memory channel (`MemoryStream`).
    enum Transport: String, CaseIterable, Sendable { case tcp, memory }

    /// The layers above the sessions, recorded.
    final class Recorder: SessionObserver, @unchecked Sendable {
        // @unchecked: every field is a Mutex.
        private let log = Mutex<(connected: [String], ended: [String], frames: [String], beats: Int, open: Set<UInt64>)>(([], [], [], 0, []))
        var connected: [String] { log.withLock { $0.connected } }
        var ended: [String] { log.withLock { $0.ended } }
        var frames: [String] { log.withLock { $0.frames } }
        var timerBeats: Int { log.withLock { $0.beats } }
        /// The sessions reported connected and not ended since.
        var stillConnected: [UInt64] { log.withLock { $0.open.sorted() } }

        func sessionConnected(_ session: Session) {
            log.withLock {
                $0.connected.append(session.peer.name)
                $0.open.insert(session.id)
            }
        }
        func transferFrame(_ frame: Frame, on session: Session) {
            let text: String
            if case let .indexAck(folder, sequence) = frame { text = "indexAck(\(folder), \(sequence))" } else { text = "\(frame.type)" }
            log.withLock { $0.frames.append(text) }
        }
        func streamFrame(_ frame: Frame, on session: Session) -> Bool { true }
        func sessionEnded(_ session: Session, reason: String) {
            log.withLock {
                $0.ended.append(reason)
                $0.open.remove(session.id)
            }
        }
        func timerFired() { log.withLock { $0.beats += 1 } }
    }

    /// Discovery, recorded: what it was told to hold off.
    final class Nearby: NearbyPeers, @unchecked Sendable {
        // @unchecked: `heldOff` is a Mutex.
        let heldOff = Mutex<Set<String>>([])
        func holdOff(_ device: String) { _ = heldOff.withLock { $0.insert(device) } }
        func release(_ device: String) { _ = heldOff.withLock { $0.remove(device) } }
        func isHeldOff(_ device: String) -> Bool { heldOff.withLock { $0.contains(device) } }
        func addresses(of device: String) -> [String] { [] }
        func nearbyUnpairedNames() -> [String] { [] }
    }

    /// One end: a connection service listening on loopback (or not listening at all, for
    /// streams handed to it: `address` is then empty), its index, events and observer.
    final class Peer: @unchecked Sendable {
        // @unchecked: immutable after init; the service confines its state to `queue`.
        let identity: Identity
        let index: NodeIndex
        let queue: DispatchQueue
        let bus = EventBus()
        let recorded = EventLog()
        let observer = Recorder()
        let nearby = Nearby()
        let service: ConnectionService
        let address: String
        let config: NodeConfig

        var key: String { identity.deviceID.compact }
        var events: [NodeEvent] { recorded.all }

        convenience init(_ name: String, listening: Bool = true, configure: (inout NodeConfig) -> Void = { _ in }) throws {
            var config = NodeConfig()
            config.listen = "127.0.0.1:0"
            config.discovery = false
            config.redialInitial = .milliseconds(50)
            config.keepaliveInterval = .milliseconds(500)
            configure(&config)
            try self.init(identity: Identity(keyPair: KeyPair.generate(), displayName: name), index: NodeIndex.inMemory(), config: config,
                          listening: listening)
        }

        /// The same identity, index and port as `earlier` (stopped): a restarted node (one that
        /// does not listen: it cannot be dialled, as behind NAT).
        convenience init(restarting earlier: Peer, listening: Bool = true) throws {
            var config = earlier.config
            config.listen = earlier.address
            try self.init(identity: earlier.identity, index: earlier.index, config: config, listening: listening)
        }

        private init(identity: Identity, index: NodeIndex, config: NodeConfig, listening: Bool = true) throws {
            self.identity = identity
            self.index = index
            self.config = config
            queue = DispatchQueue(label: "test.connections.\(identity.displayName)")
            service = ConnectionService(queue: queue, identity: identity, config: config, index: index, events: bus,
                                        features: ["messages", ConnectionService.certificateFeature])
            service.observer = observer
            service.nearby = nearby
            _ = bus.subscribe { [recorded] event in recorded.emit(event) }
            address = listening ? try service.listen().address : ""
            queue.sync { service.startTimer() }
        }

        func onQueue<T>(_ body: () -> T) -> T { queue.sync(execute: body) }

        /// Invites `other` at its address (what `pair HOST:PORT` does), or over a new
        /// in-memory channel to it.
        func invite(_ other: Peer, over transport: Transport = .tcp) -> Outcome {
            let outcome = Outcome()
            if transport == .memory {
                let (mine, theirs) = MemoryStream.pair()
                other.service.accept(over: theirs)
                service.connect(over: mine, expected: nil, context: nil, completion: { outcome.set($0) })
                return outcome
            }
            queue.async { [self] in
                service.invite(address: other.address, expected: nil, context: nil, progress: { _ in },
                               completion: { outcome.set($0) })
            }
            return outcome
        }
    }

    func eventually(_ what: String, timeout: Double = 15, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !condition() {
            guard Date() < deadline else { throw TransferPair.Timeout(what: what) }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }
}

extension ConnectionService {
    /// `peers` without discovery, sorted by name (what the node lists).
    func peerList() throws(EngineError) -> [PeerSummary] {
        let result: Result<[PeerSummary], EngineError> = queue.sync {
            do throws(EngineError) { return .success(try peerEntries().values.sorted { $0.peer.name < $1.peer.name }) } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
