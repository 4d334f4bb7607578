import Foundation
import Testing

/// Many small files (issue 43.6, B at 100,000 files). Their content travels with alice's index
/// pages, and bob keeps it only within his budget for content waiting for a pull. Alice sends
/// a page with content only once bob's pulls have taken enough of what she sent before, so
/// what she sends is about one copy of the files. Before, she sent every page at once: what
/// came beyond bob's budget was dropped and asked for again, each file twice (B at 100,000
/// files: 696 MB sent for 410 MB). A small budget on both nodes shows it with few files.
@Suite(.serialized)
struct ManySmallFilesTests {
    typealias Sync = FolderSyncTests

    @Test func manySmallFilesAreSentAboutOnce() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        // 3 MiB held on bob: ~2,800 files of 1 KiB, a third of them.
        let knobs = Sync.environment.merging(["SYNCPEER_INDEX_BLOCK_BUDGET": String(3 << 20)]) { $1 }
        let docs = env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: env.home("bob-recv"), withIntermediateDirectories: true)
        let alice = try Sync.Trio.daemon(env, "alice", environment: knobs)
        let bob = try Sync.Trio.daemon(env, "bob", environment: knobs)
        _ = try env.pair(alice, bob, autoAccepted: true)
        try alice.waitForState("connected", peer: "bob")
        try "hello".write(toFile: docs + "/hello.txt", atomically: true, encoding: .utf8)
        #expect(try env.cli(alice, ["share", docs, "--with", "bob"]).status == 0)
        let received = env.home("bob-recv") + "/docs"
        try Sync.eventually("bob has the folder") { FileManager.default.fileExists(atPath: received + "/hello.txt") }

        // Written aside, then moved in at once, as B does.
        let (count, size) = (8_000, 1_024)
        let staging = env.home("many")
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        for n in 0..<count { try TestFiles.random(staging + "/f\(n)", size: size, mtime: nil) }
        let expected = try (0..<count).map { try TestFiles.hash(staging + "/f\($0)") }
        try FileManager.default.moveItem(atPath: staging, toPath: docs + "/many")
        try Sync.eventually("bob has every file", timeout: 120) {
            (try? FileManager.default.contentsOfDirectory(atPath: received + "/many").count) == count
                && (0..<count).allSatisfy { (try? TestFiles.hash(received + "/many/f\($0)")) == expected[$0] }
        }
        let status = try env.cli(alice, ["status", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        let peers = ((object?["folders"] as? [[String: Any]])?.first?["peers"] as? [[String: Any]]) ?? []
        let sent = peers.reduce(0) { $0 + (($1["sentBytes"] as? NSNumber)?.intValue ?? 0) }
        print("manySmallFilesAreSentAboutOnce: alice sent \(sent) bytes of content for \(count * size)")
        #expect(sent >= count * size && Double(sent) <= 1.15 * Double(count * size), "alice sent \(sent) bytes for \(count * size)")
    }
}
