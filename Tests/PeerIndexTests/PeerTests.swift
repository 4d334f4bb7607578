import Foundation
import PeerIndex
import Testing

@Suite struct PeerTests {
    @Test(arguments: PeerRecord.Trust.allCases)
    func peerRoundTrips(_ trust: PeerRecord.Trust) throws {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        let peer = samplePeer(3, name: "Zoë's laptop", trust: trust)
        try index.upsertPeer(peer)
        #expect(try index.peer(deviceID: peer.deviceID) == peer)
        #expect(try index.peer(deviceID: deviceID(4)) == nil)
    }

    @Test func upsertReplacesButKeepsFirstSeen() throws {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        var peer = samplePeer(1, trust: .pending)
        try index.upsertPeer(peer)
        var changed = peer
        changed.name = "renamed"
        changed.trust = .paired
        changed.pairedAt = 5_000
        changed.firstSeen = 9_999
        try index.upsertPeer(changed)
        peer = changed
        peer.firstSeen = samplePeer(1).firstSeen
        #expect(try index.peer(deviceID: peer.deviceID) == peer)
        #expect(try index.peers().count == 1)
    }

    @Test func listsByNameAndDeletes() throws {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        try index.upsertPeer(samplePeer(1, name: "bob"))
        try index.upsertPeer(samplePeer(2, name: "alice"))
        try index.upsertPeer(samplePeer(3, name: "bob"))
        #expect(try index.peers().map(\.name) == ["alice", "bob", "bob"])
        #expect(Set(try index.peers(named: "bob").map(\.deviceID)) == [deviceID(1), deviceID(3)])
        #expect(try index.peers(named: "carol").isEmpty)
        #expect(try index.deletePeer(deviceID: deviceID(1)))
        #expect(try !index.deletePeer(deviceID: deviceID(1)))
        #expect(try index.peers(named: "bob").map(\.deviceID) == [deviceID(3)])
    }

    @Test func updateLastSeenMovesTheAddressToTheFrontAndCapsTheList() throws {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        var peer = samplePeer(2)
        peer.addresses = []
        try index.upsertPeer(peer)
        for n in 0..<10 {
            try index.updateLastSeen(deviceID: peer.deviceID, address: "10.0.0.\(n):22000")
        }
        try index.updateLastSeen(deviceID: peer.deviceID, at: 42, address: "10.0.0.5:22000")
        let stored = try #require(try index.peer(deviceID: peer.deviceID))
        #expect(stored.lastSeen == 42)
        #expect(stored.addresses.count == NodeIndex.maxRememberedAddresses)
        #expect(stored.addresses.prefix(3) == ["10.0.0.5:22000", "10.0.0.9:22000", "10.0.0.8:22000"])
        try index.updateLastSeen(deviceID: peer.deviceID)
        #expect(try index.peer(deviceID: peer.deviceID)?.lastSeen == fixedClock())

        let error = #expect(throws: IndexError.self) { try index.updateLastSeen(deviceID: deviceID(50)) }
        #expect(error?.kind == .notFound)
    }

    @Test func thirtyOneByteKeyIsRejectedByTheCheckConstraint() throws {
        let index = try NodeIndex.inMemory(clock: fixedClock)
        var peer = samplePeer(1)
        peer.publicKey = key(1, count: 31)
        let error = #expect(throws: IndexError.self) { try index.upsertPeer(peer) }
        #expect(error?.resultCode == 275) // SQLITE_CONSTRAINT_CHECK
        #expect(error?.message.contains("length(public_key) = 32") == true)
        #expect(try index.peers().isEmpty)
    }

    struct BadRow: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let column: String
        let value: SQLValue
    }

    static let badRows: [BadRow] = [
        BadRow(testDescription: "unknown trust value", column: "trust", value: "friend"),
        BadRow(testDescription: "31-byte public key", column: "public_key", value: .blob(key(1, count: 31))),
        BadRow(testDescription: "33-byte public key", column: "public_key", value: .blob(key(1, count: 33))),
        BadRow(testDescription: "auto_accept 2", column: "auto_accept", value: 2),
        BadRow(testDescription: "name over 63 bytes", column: "name", value: .text(String(repeating: "é", count: 32))),
        BadRow(testDescription: "device ID too short", column: "device_id", value: .text(String(deviceID(1).dropLast()))),
        BadRow(testDescription: "device ID in lowercase", column: "device_id", value: .text(deviceID(1).lowercased())),
        BadRow(testDescription: "addresses not a JSON array", column: "addresses", value: "{\"a\": 1}"),
        BadRow(testDescription: "text in an INTEGER column", column: "first_seen", value: "yesterday"),
    ]

    /// The schema itself rejects rows the typed API cannot even express.
    @Test(arguments: badRows)
    func schemaRejectsInvalidPeerRows(_ bad: BadRow) throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("index.db").path
            _ = try NodeIndex.open(at: path, clock: fixedClock)
            let db = try Database.open(path: path)
            var values: [String: SQLValue] = [
                "device_id": .text(deviceID(1)), "name": "bob", "public_key": .blob(key(1)), "trust": "paired",
                "auto_accept": 0, "first_seen": 1, "addresses": "[]",
            ]
            values[bad.column] = bad.value
            let columns = values.keys.sorted()
            let sql = "INSERT INTO peers (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
            let error = #expect(throws: IndexError.self) { try db.execute(sql, columns.map { values[$0]! }) }
            #expect(error?.primaryResultCode == 19) // SQLITE_CONSTRAINT
            #expect(error?.sql == sql)
        }
    }
}

extension PeerTests {
    /// Schema 0007: the folders switch is stored apart from files, and an index from before
    /// it keeps each peer's files setting with folders off (files on no longer joins folders).
    @Test func autoAcceptFoldersIsItsOwnSwitchAndStartsOffAfterTheMigration() throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("index.db").path
            let peer = samplePeer(2)
            try makeIndex(at: path, upTo: 6) { db in
                try db.execute("INSERT INTO peers (device_id, name, public_key, trust, auto_accept, first_seen) VALUES (?, ?, ?, 'paired', 1, 1)",
                               [.text(peer.deviceID), .text(peer.name), .blob(peer.publicKey)])
            }
            let index = try NodeIndex.open(at: path, clock: fixedClock)
            var stored = try #require(try index.peer(deviceID: peer.deviceID))
            #expect(stored.autoAccept && !stored.autoAcceptFolders)
            stored.autoAcceptFolders = true
            stored.autoAccept = false
            try index.upsertPeer(stored)
            #expect(try index.peer(deviceID: peer.deviceID) == stored)
        }
    }
}
