import Dispatch
import PeerCrypto
@testable import SyncEngine
import Synchronization
import Testing

/// The node's event bus on its own: no node, no sockets.
@Suite struct EventBusTests {
    final class Recorder: Sendable {
        let seen = Mutex<[String]>([])
        func add(_ text: String) { seen.withLock { $0.append(text) } }
        var all: [String] { seen.withLock { $0 } }
    }

    static func event(_ n: Int) -> NodeEvent { .listening(.init(address: "127.0.0.1:\(n)", time: Int64(n))) }

    static func address(_ event: NodeEvent) -> String {
        if case let .listening(listening) = event { return listening.address }
        return "?"
    }

    @Test func everySubscriberGetsEveryEventInOrderUntilItUnsubscribes() {
        let bus = EventBus()
        let first = Recorder(), second = Recorder()
        let a = bus.subscribe { first.add(Self.address($0)) }
        _ = bus.subscribe { second.add(Self.address($0)) }
        bus.emit(Self.event(1))
        bus.emit(Self.event(2))
        bus.unsubscribe(a)
        bus.emit(Self.event(3))
        #expect(first.all == ["127.0.0.1:1", "127.0.0.1:2"])
        #expect(second.all == ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"])
    }

    /// With the subscribers behind the node's queue, a handler that subscribed from inside a
    /// callback (on that queue) waited for itself for ever; the bus has its own lock.
    @Test func aHandlerMaySubscribeAndUnsubscribeFromInsideACallback() {
        let bus = EventBus()
        let inner = Recorder()
        let token = Mutex<UInt64?>(nil)
        _ = bus.subscribe { event in
            guard Self.address(event) == "127.0.0.1:1" else { return }
            let added = bus.subscribe { inner.add(Self.address($0)) }
            token.withLock { $0 = added }
        }
        bus.emit(Self.event(1))
        bus.emit(Self.event(2))
        if let added = token.withLock({ $0 }) { bus.unsubscribe(added) }
        bus.emit(Self.event(3))
        #expect(inner.all == ["127.0.0.1:2"])
    }

    @Test func messagesGoToMessageSubscribersOnlyAndOneUnsubscribeEndsEither() {
        let bus = EventBus()
        let bodies = Recorder(), events = Recorder()
        let messages = bus.subscribeMessages { peer, body in bodies.add("\(peer.name): \(String(decoding: body, as: UTF8.self))") }
        _ = bus.subscribe { events.add(Self.address($0)) }
        let peer = PeerRef(id: DeviceID(publicKey: KeyPair.generate().publicKey), name: "alice")
        bus.deliverMessage(from: peer, body: Array("hi".utf8))
        bus.unsubscribe(messages)
        bus.deliverMessage(from: peer, body: Array("gone".utf8))
        #expect(bodies.all == ["alice: hi"])
        #expect(events.all.isEmpty)
    }

    @Test func emitsFromManyThreadsReachEverySubscriberOnce() {
        let bus = EventBus()
        let recorders = (0..<4).map { _ in Recorder() }
        for recorder in recorders { _ = bus.subscribe { recorder.add(Self.address($0)) } }
        DispatchQueue.concurrentPerform(iterations: 400) { bus.emit(Self.event($0)) }
        for recorder in recorders {
            #expect(Set(recorder.all) == Set((0..<400).map { "127.0.0.1:\($0)" }) && recorder.all.count == 400)
        }
    }
}
