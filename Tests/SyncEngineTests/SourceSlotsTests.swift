import Testing
@testable import SyncEngine

/// The caps on pending handshakes and unpaired sessions: per source, in total, and the
/// fairness rule that lets a quiet source in when a busy one holds the slots.
struct SourceSlotsTests {
    @Test func oneSourceCannotTakeMoreThanItsShare() {
        var slots = SourceSlots<Int>(total: 8, perSource: 3)
        var admitted = 0
        for id in 1...10 { if case .admitted = slots.admit(id: UInt64(id), source: "10.0.0.1", holder: id) { admitted += 1 } }
        #expect(admitted == 3)
        #expect(slots.count(from: "10.0.0.1") == 3)
        guard case .admitted = slots.admit(id: 99, source: "10.0.0.2", holder: 99) else {
            Issue.record("another source is refused")
            return
        }
    }

    @Test func aQuietSourceTakesTheOldestSlotOfTheBusiestWhenFull() {
        var slots = SourceSlots<Int>(total: 4, perSource: 3)
        for id in 1...3 { _ = slots.admit(id: UInt64(id), source: "a", holder: id) }
        _ = slots.admit(id: 4, source: "b", holder: 4)
        guard case let .admittedEvicting(evicted) = slots.admit(id: 5, source: "c", holder: 5) else {
            Issue.record("full: the newcomer from c should evict a's oldest")
            return
        }
        #expect(evicted == 1)
        #expect(slots.count(from: "a") == 2 && slots.count(from: "c") == 1 && slots.holders.count == 4)
        // Now a has 2, b 1, c 1: another from b would leave a with 1 and b with 2, so
        // a still gives way; from a or when everyone is even, the newcomer is refused.
        guard case .refused = slots.admit(id: 6, source: "a", holder: 6) else {
            Issue.record("a may not push out others")
            return
        }
        guard case .admittedEvicting(2) = slots.admit(id: 7, source: "d", holder: 7) else {
            Issue.record("d should take a's oldest remaining slot")
            return
        }
        guard case .refused = slots.admit(id: 8, source: "e", holder: 8) else {
            Issue.record("all sources hold one: no ping-pong")
            return
        }
    }

    @Test func releaseFreesTheSlotAndIgnoresUnknownIDs() {
        var slots = SourceSlots<Int>(total: 1, perSource: 1)
        _ = slots.admit(id: 1, source: "a", holder: 1)
        slots.release(id: 42)
        #expect(slots.holders.count == 1)
        slots.release(id: 1)
        guard case .admitted = slots.admit(id: 2, source: "a", holder: 2) else {
            Issue.record("the released slot is free")
            return
        }
    }

    @Test func sourceKeysGroupIPv6By64AndUnmapIPv4() {
        #expect(SourceSlots<Int>.sourceKey("127.0.0.2") == "127.0.0.2")
        #expect(SourceSlots<Int>.sourceKey("::ffff:192.168.1.9") == "192.168.1.9")
        #expect(SourceSlots<Int>.sourceKey("2001:db8:1:2::5") == SourceSlots<Int>.sourceKey("2001:db8:1:2:aaaa::9"))
        #expect(SourceSlots<Int>.sourceKey("2001:db8:1:2::5") != SourceSlots<Int>.sourceKey("2001:db8:1:3::5"))
        #expect(SourceSlots<Int>.sourceKey("2001:db8:1:2::5") == "20010db800010002::/64")
    }
}
