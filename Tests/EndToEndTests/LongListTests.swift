import Foundation
import PeerCrypto
import PeerFiles
import PeerIndex
import Testing

/// Lists that grow with use, answered by a real daemon to the real CLI and dashboard: the
/// control socket pages them (one answer line was once the whole list, and a list past the
/// 1 MiB line limit made the command fail), and the transfer history is pruned.
@Suite struct LongListTests {
    /// A paired peer with the longest display name: every entry naming it is long.
    static let peerName = String(repeating: "p", count: 63)

    /// Initialises `name`'s home and opens its index with one paired peer in it; returns the
    /// index (to fill before the daemon starts) and the peer's device ID (compact).
    static func seededHome(_ env: SyncpeerRunner, _ name: String) throws -> (index: NodeIndex, peer: String) {
        let home = env.home(name)
        let result = try env.run(["--home", home, "init", "--name", name])
        try #require(result.status == 0, "init failed: \(result.stderr)")
        let key = [UInt8](repeating: 7, count: 32)
        let peer = DeviceID(publicKey: try PublicKey(key)).compact
        let index = try NodeIndex.open(at: home + "/index.db")
        try index.upsertPeer(PeerRecord(deviceID: peer, name: peerName, publicKey: key, trust: .paired, firstSeen: 1, pairedAt: 1))
        return (index, peer)
    }

    /// The JSON objects of NDJSON output.
    static func objects(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test func fourThousandTransfersAreListedAsTheirPrunedHistoryAlsoAfterARestart() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        func id(_ n: Int) -> String { String(format: "%032x", n) }
        do {
            let (index, peer) = try Self.seededHome(env, "alice")
            // 4,000 finished transfers with long names (well over 1 MiB as one list), the
            // newest last, and one paused (resumable) older than all of them.
            for n in 0..<4000 {
                let record = TransferRecord(id: id(n), direction: .receive, deviceID: peer, name: "holiday-\(n)-" + String(repeating: "x", count: 120),
                                            size: 1000, mode: 0o644, mtimeNs: 0, rootHash: [UInt8](repeating: 1, count: 32), chunkCount: 0,
                                            state: .completed, createdAt: now - 4000 + Int64(n))
                try index.insertTransfer(record, chunks: [])
            }
            let paused = TransferRecord(id: id(99_999), direction: .receive, deviceID: peer, name: "paused.iso", size: 1 << 30, mode: 0o644,
                                        mtimeNs: 0, rootHash: [UInt8](repeating: 2, count: 32), chunkCount: 0, state: .paused,
                                        createdAt: now - 86_400_000)
            try index.insertTransfer(paused, chunks: [])
        }
        // The newest 1,000 finished ones are kept (README: "Transfers"), and the paused one.
        let expected = Set((3000..<4000).map(id) + [id(99_999)])
        var alice = try DaemonProcess(env, name: "alice")
        for round in ["first start", "after a restart"] {
            let json = try env.cli(alice, ["transfers", "--json"])
            #expect(json.status == 0, "\(round): \(json.stderr)")
            let listed = Self.objects(json.stdout).compactMap { $0["transfer"] as? String }
            #expect(listed.count == expected.count && Set(listed) == expected, "\(round): \(listed.count) listed")
            #expect(listed.first == id(3999), "\(round): newest first")
            let text = try env.cli(alice, ["transfers"])
            #expect(text.status == 0, "\(round): \(text.stderr)")
            #expect(text.stdout.split(separator: "\n").count == expected.count, "\(round)")
            _ = alice.stop()
            if round == "first start" { alice = try DaemonProcess(env, name: "alice") }
        }
        // Pruned in the index itself: the history without a daemon is the same.
        let offline = try env.run(["--home", env.home("alice"), "transfers", "--json"])
        #expect(Set(Self.objects(offline.stdout).compactMap { $0["transfer"] as? String }) == expected, "\(offline.stderr)")
    }

    @Test func thirtyFiveHundredShareOffersLeaveStatusAndTheDashboardsFolderListWorking() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        func folderID(_ n: Int) -> String {
            let digits = (0..<10).map { alphabet[(n >> (5 * (9 - $0))) & 31] }
            return String(digits[..<5]) + "-" + String(digits[5...])
        }
        do {
            let (index, peer) = try Self.seededHome(env, "alice")
            for n in 0..<3500 {
                try index.recordFolderOffer(folderID: folderID(n), deviceID: peer, label: "album \(n) " + String(repeating: "y", count: 110))
            }
        }
        let (alice, port, link) = try DashboardTests.daemon(env, "alice")
        defer { _ = alice.stop() }

        let text = try env.cli(alice, ["status"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.split(separator: "\n").filter { $0.hasPrefix("offer: ") }.count == 3500)
        let json = try env.cli(alice, ["status", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let offered = Self.objects(json.stdout).flatMap { ($0["offers"] as? [[String: Any]]) ?? [] }.compactMap { $0["folder"] as? String }
        #expect(Set(offered) == Set((0..<3500).map(folderID)) && offered.count == 3500)

        // The dashboard's folder list answers, with the first offers and where the rest start.
        let (cookie, csrf) = try DashboardTests.login(port, link: link)
        func post(_ body: String) throws -> [String: Any] {
            let answer = try DashboardTests.exchange(port, DashboardTests.post(body, port: port, cookie: cookie, csrf: csrf,
                                                                               origin: "http://127.0.0.1:\(port)"))
            try #require(answer.status == 200, "\(answer.head)")
            return try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any], "\(answer.body.prefix(300))")
        }
        let folders = try post(#"{"op":"folders"}"#)
        #expect(folders["ok"] as? Bool == true, "\(folders["error"] ?? "")")
        let result = try #require(folders["result"] as? [String: Any])
        var seen = ((result["offers"] as? [[String: Any]]) ?? []).compactMap { $0["folder"] as? String }
        var next = result["offersNext"] as? String
        #expect(!seen.isEmpty && next != nil)
        var pages = 0
        while let after = next, pages < 100 {
            let body = String(decoding: try JSONSerialization.data(withJSONObject: ["op": "offers", "after": after]), as: UTF8.self)
            let page = try post(body)
            #expect(page["ok"] as? Bool == true, "\(page["error"] ?? "")")
            seen += ((page["result"] as? [[String: Any]]) ?? []).compactMap { $0["folder"] as? String }
            next = page["next"] as? String
            pages += 1
        }
        #expect(seen.count == 3500 && Set(seen).count == 3500, "\(seen.count) offers over \(pages) pages")
    }

    @Test func threeThousandConflictCopiesAreListed() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let root = env.home("docs")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        var copies: Set<String> = []
        for n in 0..<3000 {
            let copy = ConflictName.make(for: "notes-\(n)-" + String(repeating: "z", count: 110) + ".txt", at: 1_780_000_000 + Int64(n),
                                         device: "ABCDEFG")
            try Data("copy \(n)\n".utf8).write(to: URL(fileURLWithPath: root + "/" + copy))
            copies.insert(root + "/" + copy)
        }
        do {
            let (index, peer) = try Self.seededHome(env, "alice")
            _ = try index.addFolder(id: "docsa-aaaaa", path: root, label: "docs", sharedWith: [peer])
        }
        let alice = try DaemonProcess(env, name: "alice")
        defer { _ = alice.stop() }
        // Once the first scan has indexed them all.
        let deadline = Date().addingTimeInterval(60)
        var scanned = false
        while !scanned && Date() < deadline {
            let status = try env.cli(alice, ["status", "--json"])
            let folder = (Self.objects(status.stdout).first?["folders"] as? [[String: Any]])?.first
            scanned = folder?["state"] as? String == "idle" && folder?["files"] as? Int == 3000
            if !scanned { Thread.sleep(forTimeInterval: 0.3) }
        }
        try #require(scanned, "the folder was not scanned")

        let json = try env.cli(alice, ["conflicts", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        // One conflicted file per copy (each has its own original), its copy its one version.
        let listed = Self.objects(json.stdout).flatMap { ($0["versions"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String } }
        #expect(listed.count == 3000 && Set(listed) == copies, "\(listed.count) listed")
        let text = try env.cli(alice, ["conflicts"])
        let choices = text.stdout.split(separator: "\n").filter { $0.hasPrefix("  keep one: ") }
        #expect(text.status == 0 && choices.count == 3000, "\(text.stderr)")
    }
}
