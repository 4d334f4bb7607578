import Testing
import PeerNet

@Suite struct DiscoveryRulesTests {
    @Test(arguments: ["a", "syncpeer", "sync-peer", "a1", "1a", "abcdefghijklmno", "x-1-y"])
    func validServiceTypes(_ text: String) throws {
        #expect(try ServiceType(text).name == text)
        #expect(try ServiceType(text).domain.description == "_\(text)._tcp.local")
    }

    @Test(arguments: [
        ("", DiscoveryRuleError.serviceTypeEmpty),
        ("abcdefghijklmnop", .serviceTypeTooLong(16)),
        ("Sync", .serviceTypeInvalidCharacter("S")),
        ("sync_peer", .serviceTypeInvalidCharacter("_")),
        ("sync.peer", .serviceTypeInvalidCharacter(".")),
        ("été", .serviceTypeInvalidCharacter("é")),
        ("12-34", .serviceTypeNoLetter),
        ("-sync", .serviceTypeHyphenAtEdge),
        ("sync-", .serviceTypeHyphenAtEdge),
        ("sync--peer", .serviceTypeAdjacentHyphens),
    ] as [(String, DiscoveryRuleError)])
    func invalidServiceTypes(_ text: String, _ expected: DiscoveryRuleError) {
        #expect(throws: expected) { try ServiceType(text) }
        #expect(!expected.description.isEmpty)
    }

    @Test func errorMessagesNameTheRule() {
        #expect(DiscoveryRuleError.serviceTypeTooLong(16).description.contains("at most 15"))
        #expect(DiscoveryRuleError.serviceTypeAdjacentHyphens.description.contains("adjacent hyphens"))
        #expect(DiscoveryRuleError.infoTooLarge(bytes: 401).description.contains("400"))
        #expect(DiscoveryRuleError.infoPairTooLong(key: "k", bytes: 256).description.contains("255"))
    }

    @Test func validDiscoveryInfo() throws {
        #expect(try DiscoveryInfo().pairs.isEmpty)
        #expect(try DiscoveryInfo(["name": "Alice", "empty": ""]).pairs.count == 2)
        // A pair of exactly 255 bytes: "k=" + 253.
        _ = try DiscoveryInfo(["k": String(repeating: "v", count: 253)])
        // 400 bytes in all: two pairs of 200.
        _ = try DiscoveryInfo(["a": String(repeating: "v", count: 198), "b": String(repeating: "v", count: 198)])
    }

    @Test(arguments: [
        (["": "x"], DiscoveryRuleError.infoKeyEmpty),
        (["a=b": "x"], .infoKeyContainsEquals("a=b")),
        (["id": "x"], .infoKeyReserved("id")),
        (["V": "x"], .infoKeyReserved("V")),
        (["k": String(repeating: "v", count: 254)], .infoPairTooLong(key: "k", bytes: 256)),
        (["a": String(repeating: "v", count: 199), "b": String(repeating: "v", count: 198)], .infoTooLarge(bytes: 401)),
        (["é": String(repeating: "v", count: 253)], .infoPairTooLong(key: "é", bytes: 256)),
    ] as [([String: String], DiscoveryRuleError)])
    func invalidDiscoveryInfo(_ pairs: [String: String], _ expected: DiscoveryRuleError) {
        #expect(throws: expected) { try DiscoveryInfo(pairs) }
    }
}
