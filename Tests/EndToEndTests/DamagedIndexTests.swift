import Foundation
import PeerIndex
import Testing

/// Issue 42.2, through a real daemon and the CLI: an index damaged under the running daemon
/// (here a table renamed away by another connection, as a bad restore leaves it) gives the
/// user the index's error, not a wrong answer about the peer.
@Suite struct DamagedIndexTests {
    @Test func shareTransfersAndStatusOnADamagedIndexSayWhy() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice")
        defer { alice.stop() }
        let docs = env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        let database = try Database.open(path: alice.home + "/index.db", options: .init(createIfMissing: false, walJournal: false))
        try database.execute("ALTER TABLE peers RENAME TO peers_damaged")
        let result = try env.cli(alice, ["share", docs, "--with", "bob"])
        #expect(result.status == 4, "exit 4: damaged data")
        #expect(result.stderr.contains("no such table: peers"), "\(result.stderr)")
        #expect(!result.stderr.contains("no known peer") && !result.stderr.contains("pair first"), "\(result.stderr)")
        // Lists: the cause, not nobody paired, an empty history or no offers.
        let peers = try env.cli(alice, ["peers"])
        #expect(peers.status == 4 && peers.stderr.contains("no such table: peers"), "peers: \(peers.stdout) \(peers.stderr)")
        for (table, command) in [("transfers", "transfers"), ("folder_offers", "status")] {
            try database.execute("ALTER TABLE \(table) RENAME TO \(table)_damaged")
            let listed = try env.cli(alice, [command])
            #expect(listed.status == 4 && listed.stderr.contains("no such table: \(table)"), "\(command): \(listed.stdout) \(listed.stderr)")
        }
    }
}
