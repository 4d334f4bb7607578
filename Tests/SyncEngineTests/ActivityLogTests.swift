import PeerNet
import PeerCrypto
import Testing
@testable import SyncEngine

/// The daemon's activity log: bounded, newest first, paged, and a transfer's progress left out.
struct ActivityLogTests {
    static func visibility(_ time: Int64) -> NodeEvent { .visibility(.init(state: "visible", time: time)) }

    static func transfer(_ state: TransferState, bytes: Int64, time: Int64) -> NodeEvent {
        .transfer(TransferInfo(transfer: "3f9a", direction: .send, peer: nil, name: "big.bin", state: state,
                               bytes: bytes, total: 100, time: time))
    }

    static func times(_ page: ListPage<JSONValue>) -> [Int64] { page.items.compactMap { $0["time"]?.intValue.map(Int64.init) } }

    @Test func keepsTheLastThousandNewestFirstInPages() {
        let log = ActivityLog()
        for time in 1...1500 { log.record(Self.visibility(Int64(time))) }
        var pages: [ListPage<JSONValue>] = [log.page(PageRequest(limit: 400))]
        while let next = pages.last?.next { pages.append(log.page(PageRequest(limit: 400, after: next))) }
        let times = pages.flatMap(Self.times)
        #expect(pages.count == 3)
        #expect(times == Array((501...1500).reversed()).map(Int64.init))
    }

    /// A peer's long messages cannot make the log large: each is kept cut to 1 KiB.
    @Test func aLongMessageIsKeptCut() throws {
        let log = ActivityLog()
        let peer = PeerRef(id: DeviceID(publicKey: KeyPair.generate().publicKey), name: "alice")
        log.record(.message(.init(peer: peer, id: 1, text: String(repeating: "é", count: 40_000), time: 1)))
        let text = try #require(log.page(PageRequest()).items.first?["text"]?.stringValue)
        #expect(text.utf8.count <= ActivityLog.messageBytes + 3 && text.hasSuffix("…") && text.hasPrefix("éé"))
    }

    @Test func aTransferIsKeptOncePerState() {
        let log = ActivityLog()
        log.record(Self.transfer(.active, bytes: 0, time: 1))
        for step in 1...50 { log.record(Self.transfer(.active, bytes: Int64(step), time: Int64(1 + step))) }
        log.record(Self.transfer(.completed, bytes: 100, time: 99))
        let kept = log.page(PageRequest())
        #expect(Self.times(kept) == [99, 1])
        #expect(kept.items.map { $0["state"]?.stringValue } == ["completed", "active"])
    }
}
