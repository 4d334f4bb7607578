import PeerModel
import Foundation
import PeerIndex
import Testing

/// `tree` of a level with many long paths answers a page at a time, each well under the line limit.
@Suite struct TreePagingTests {
    @Test func aLevelOfLongPathsIsPagedByBytes() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let root = env.home("docs")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // 300 names below a folder 14 components of 250 bytes deep: ~3.9 KiB per path, about
        // 1.2 MB for one answer of the whole level (past the 1 MiB line limit).
        let deep = (0..<14).map { String(repeating: Character(UnicodeScalar(UInt8(97 + $0))), count: 250) }.joined(separator: "/")
        do {
            let (index, peer) = try LongListTests.seededHome(env, "alice")
            try index.addFolder(id: "abcde-fghij", path: root)
            try index.addFolderPeer(folderID: "abcde-fghij", deviceID: peer)
            let records = (1...300).map { n in
                RemoteFileRecord(FileEntry(path: deep + "/file-\(n)", kind: .file, size: 10, mtimeNs: 1, mode: 0o644, version: [peer: UInt64(n)], modifiedBy: peer, sequence: Int64(n)))
            }
            try index.upsertRemoteFiles(folderID: "abcde-fghij", deviceID: peer, records)
            // Held elsewhere: nothing is pulled (the peer never connects), the tree still shows it.
            try index.setSelection(folderID: "abcde-fghij", paths: ["elsewhere"])
        }
        let (alice, port, link) = try DashboardTests.daemon(env, "alice")
        defer { _ = alice.stop() }
        let (cookie, csrf) = try DashboardTests.login(port, link: link)
        var names: [String] = []
        var next: String?
        var pages = 0
        repeat {
            var request: [String: Any] = ["op": "tree", "dir": root, "path": deep, "limit": 1000]
            if let next { request["after"] = next }
            let body = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
            let answer = try DashboardTests.exchange(port, DashboardTests.post(body, port: port, cookie: cookie, csrf: csrf,
                                                                               origin: "http://127.0.0.1:\(port)"))
            try #require(answer.status == 200, "\(answer.head)")
            #expect(answer.body.utf8.count < 300 << 10, "a page of \(answer.body.utf8.count) bytes")
            let page = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
            try #require(page["ok"] as? Bool == true, "\(page["error"] ?? "")")
            names += ((page["result"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }
            next = page["next"] as? String
            pages += 1
        } while next != nil && pages < 20
        #expect(pages > 1 && names.count == 300 && Set(names).count == 300, "\(names.count) names in \(pages) pages")
        let text = try env.cli(alice, ["tree", root, deep])
        #expect(text.status == 0 && text.stdout.split(separator: "\n").count == 300, "\(text.stderr)")
    }
}
