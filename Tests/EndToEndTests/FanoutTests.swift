import Foundation
import Testing

/// Fan-out (issue 43.4): alice adds a large file to a folder bob and carol share with her and
/// with each other, while her uplink is slow (`SYNCPEER_SERVE_RATE`). Bob and carol, fetching
/// it at once, tell each other which chunks they hold already and fetch those from each other:
/// each receives part of the file from the other, and alice sends less than two copies.
/// Before, a pull asked only peers whose index held the file: nobody but alice served it.
@Suite(.serialized)
struct FanoutTests {
    typealias Sync = FolderSyncTests

    /// Bytes `daemon`'s folder fetched from each of its peers (by name), from `status --json`.
    static func received(_ trio: Sync.Trio, _ daemon: DaemonProcess) throws -> [String: Int] {
        var out: [String: Int] = [:]
        for peer in try Sync.folderStatus(trio, daemon)["peers"] as? [[String: Any]] ?? [] {
            out[(peer["peer"] as? [String: Any])?["name"] as? String ?? "?"] = (peer["receivedBytes"] as? NSNumber)?.intValue ?? 0
        }
        return out
    }

    @Test func receiversFetchFromEachOtherWhenTheSourceIsSlow() throws {
        let trio = try Sync.Trio(aliceOnly: ["SYNCPEER_SERVE_RATE": "16000000"])
        defer { trio.env.cleanup() }
        try "hello".write(toFile: trio.path("alice", "hello.txt"), atomically: true, encoding: .utf8)
        try trio.share()
        try Sync.eventually("the first sync") { Sync.converged(trio) && FileManager.default.fileExists(atPath: trio.path("carol", "hello.txt")) }
        // Bob and carol share the folder with each other too.
        _ = try trio.env.pair(trio.bob, trio.carol, autoAccepted: true)
        try trio.bob.waitForState("connected", peer: "carol")
        let shared = try trio.env.cli(trio.bob, ["share", trio.folders["bob"]!, "--with", "carol"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let offer = try trio.carol.waitFor("share_offer", timeout: 15)
        let accepted = try trio.env.cli(trio.carol, ["accept", try #require(offer["folder"] as? String)])
        try #require(accepted.status == 0, "\(accepted.stderr)")
        try Sync.eventually("bob and carol count each other as peers of the folder") {
            (try? Self.received(trio, trio.bob))?["carol"] != nil && (try? Self.received(trio, trio.carol))?["bob"] != nil
        }

        // 64 MiB: four times what a pull keeps in flight, so its later chunks are asked for
        // once the others hold some. Written aside, then moved in whole.
        let size = 64 << 20
        let staging = trio.env.home("staging.bin")
        try TestFiles.random(staging, size: size)
        let expected = try TestFiles.hash(staging)
        try FileManager.default.moveItem(atPath: staging, toPath: trio.path("alice", "big.bin"))
        try Sync.eventually("bob and carol have the file", timeout: 120) {
            ["bob", "carol"].allSatisfy { (try? TestFiles.hash(trio.path($0, "big.bin"))) == expected }
        }
        let bob = try Self.received(trio, trio.bob)
        let carol = try Self.received(trio, trio.carol)
        print("receiversFetchFromEachOtherWhenTheSourceIsSlow: bob fetched \(bob), carol \(carol), of \(size) bytes each")
        #expect((bob["carol"] ?? 0) > 0, "bob fetched nothing from carol: \(bob)")
        #expect((carol["bob"] ?? 0) > 0, "carol fetched nothing from bob: \(carol)")
        #expect((bob["alice"] ?? 0) + (carol["alice"] ?? 0) < 2 * size, "alice sent two whole copies: \(bob), \(carol)")
        try Sync.eventually("the folder is the same everywhere\n\(Sync.describe(trio))") { Sync.converged(trio) }
    }
}
