import Testing
@testable import SyncEngine

struct PeerResolverTests {
    static let alice = PeerResolver.Candidate(deviceID: "AAAAAAA-BBBBBBB-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "alice", addresses: ["127.0.0.1:5000"])
    static let bob1 = PeerResolver.Candidate(deviceID: "BBBBBBB-AAAAAAA-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "bob", addresses: [])
    static let bob2 = PeerResolver.Candidate(deviceID: "BBBBCCC-AAAAAAA-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "bob", addresses: [])
    static let all = [alice, bob1, bob2]

    @Test(arguments: [
        ("alice", PeerResolver.Resolution.peer(alice)),
        ("AAAAAAA", .peer(alice)),
        ("aaaa-aaab", .peer(alice)),
        ("BBBBBBB-A", .peer(bob1)),
        ("127.0.0.1:5000", .peer(alice)),
        ("127.0.0.1:6000", .address("127.0.0.1:6000")),
        ("[::1]:6000", .address("[::1]:6000")),
    ])
    func resolves(_ text: String, _ expected: PeerResolver.Resolution) throws {
        #expect(try PeerResolver.resolve(text, among: Self.all) == expected)
    }

    @Test func ambiguousNameListsCandidates() {
        #expect(throws: PeerResolver.Failure.ambiguous("bob", [Self.bob1, Self.bob2])) {
            try PeerResolver.resolve("bob", among: Self.all)
        }
        let message = PeerResolver.Failure.ambiguous("bob", [Self.bob1, Self.bob2]).description
        #expect(message == "'bob' matches 2 peers: bob (BBBBBBB), bob (BBBBCCC); use a device ID (or a longer prefix) instead")
    }

    @Test func ambiguousPrefix() {
        #expect(throws: PeerResolver.Failure.ambiguous("BBBB", [Self.bob1, Self.bob2])) {
            try PeerResolver.resolve("BBBB", among: Self.all)
        }
    }

    @Test(arguments: ["carol", "AAA", "ZZZZZZZ", ""])
    func unknown(_ text: String) {
        #expect(throws: PeerResolver.Failure.self) { try PeerResolver.resolve(text, among: Self.all) }
    }
}
