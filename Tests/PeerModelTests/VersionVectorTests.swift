import Foundation
import PeerModel
import Testing
import TestKit

/// Device IDs in byte order: devA < devB < devC.
private let devA = String(repeating: "A", count: 56)
private let devB = String(repeating: "B", count: 56)
private let devC = String(repeating: "C", count: 56)

private func vv(_ counters: [String: UInt64]) -> VersionVector { VersionVector(counters) }

private func randomVector(_ rng: inout SplitMix64, devices: [String] = [devA, devB, devC], maxCounter: UInt64 = 3) -> VersionVector {
    var counters: [String: UInt64] = [:]
    for device in devices { counters[device] = UInt64.random(in: 0...maxCounter, using: &rng) }
    return VersionVector(counters)
}

@Suite struct VersionVectorTests {
    @Test func compareTable() {
        let rows: [(VersionVector, VersionVector, VersionVector.Ordering)] = [
            (vv([:]), vv([:]), .equal),
            (vv([devA: 1]), vv([devA: 1]), .equal),
            (vv([devA: 1, devB: 0]), vv([devA: 1]), .equal),
            (vv([devA: 2]), vv([devA: 1]), .greater),
            (vv([devA: 1]), vv([:]), .greater),
            (vv([devA: 1, devB: 1]), vv([devA: 1]), .greater),
            (vv([devA: 1]), vv([devA: 1, devB: 1]), .lesser),
            (vv([devA: 1]), vv([devB: 1]), .concurrent),
            (vv([devA: 2, devB: 1]), vv([devA: 1, devB: 2]), .concurrent),
            (vv([devA: 5, devB: 1]), vv([devA: 1, devB: 1, devC: 1]), .concurrent),
            (vv([devA: UInt64.max]), vv([devA: UInt64.max - 1]), .greater),
        ]
        for (a, b, expected) in rows {
            #expect(a.compare(b) == expected, "\(a) vs \(b)")
        }
    }

    @Test func mergeIncrementAndZeros() {
        let a = vv([devA: 3, devB: 1]), b = vv([devB: 4, devC: 2])
        #expect(a.merged(with: b) == vv([devA: 3, devB: 4, devC: 2]))
        #expect(a.incremented(for: devC) == vv([devA: 3, devB: 1, devC: 1]))
        #expect(a.incremented(for: devA) == vv([devA: 4, devB: 1]))
        #expect(a.incremented(for: devA, minimum: 1_700_000_000) == vv([devA: 1_700_000_000, devB: 1]))
        #expect(vv([devA: UInt64.max]).incremented(for: devA)[devA] == UInt64.max, "saturates instead of trapping")
        #expect(VersionVector([devA: 0]).isEmpty && VersionVector([devA: 0]) == VersionVector())
        #expect(a[devC] == 0)
    }

    @Test func jsonMatchesTheIndexFormatAndFoundation() throws {
        let v = vv([devB: 2, devA: 18_446_744_073_709_551_615, "weird \"key\"": 7])
        #expect(v.json == "{\"\(devA)\":18446744073709551615,\"\(devB)\":2,\"weird \\\"key\\\"\":7}")
        #expect(VersionVector(json: v.json) == v)
        #expect(VersionVector(json: "{}") == VersionVector())
        #expect(VersionVector(json: " { \"a\" : 1 , \"b\":2 } ") == vv(["a": 1, "b": 2]))
        // Keys with and without escapes (the parser's fast path takes the unescaped ones).
        #expect(VersionVector(json: "{\"é\\u00e9\":1,\"ü\":2}") == vv(["éé": 1, "ü": 2]))
        for bad in ["", "[]", "{\"a\":-1}", "{\"a\":1.5}", "{\"a\":1e3}", "{\"a\":01}", "{\"a\":1,\"a\":2}", "{\"a\":1}x",
                    "{\"a\":18446744073709551616}", "{a:1}", "{\"a\":\"1\"}", "{\"a\":1,}", "{\"a\u{01}b\":1}", "{\"a\":1", "{\"a"] {
            #expect(VersionVector(json: bad) == nil, "\(bad)")
        }
        // Foundation with sorted keys writes the same text for device-ID keys.
        var rng = SplitMix64(seed: 3)
        for _ in 0..<50 {
            let random = randomVector(&rng, maxCounter: 1_000_000)
            let foundation = String(decoding: try JSONSerialization.data(withJSONObject: random.counters, options: [.sortedKeys]),
                                    as: UTF8.self)
            #expect(foundation == random.json)
        }
    }

    @Test func propertiesOfDominance() {
        var rng = SplitMix64(seed: 42)
        let vectors = (0..<80).map { _ in randomVector(&rng) }
        for a in vectors {
            #expect(a.compare(a) == .equal)
            for b in vectors {
                let ab = a.compare(b), ba = b.compare(a)
                switch ab {
                case .equal: #expect(ba == .equal && a == b)
                case .greater: #expect(ba == .lesser)
                case .lesser: #expect(ba == .greater)
                case .concurrent: #expect(ba == .concurrent)
                }
                let m = a.merged(with: b)
                #expect(m.dominates(a) && m.dominates(b))
                #expect(m == b.merged(with: a))
                #expect(a.incremented(for: devB).compare(a) == .greater)
                for c in vectors where ab == .greater && b.compare(c) == .greater {
                    #expect(a.compare(c) == .greater, "dominance is transitive")
                }
                for c in vectors where a.dominates(b) && b.dominates(c) {
                    #expect(a.dominates(c))
                }
            }
        }
    }
}
