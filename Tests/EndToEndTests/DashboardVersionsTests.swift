import Foundation
import Testing

/// Issue 41, point 2 on the dashboard: a page asks for a folder's history ("Recently deleted")
/// and restores a version through the same API the CLI uses.
@Suite struct DashboardVersionsTests {
    @Test func aPageListsADeletedFileAndRestoresItFromAPeer() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, bob, port, link) = try Self.pair(env)
        defer { alice.stop(); bob.stop() }
        let docs = env.home("docs")
        try "minutes of the meeting".write(toFile: docs + "/minutes.txt", atomically: true, encoding: .utf8)
        _ = try VersionsTests.json(env, alice, ["share", docs, "--with", "bob"])
        let bobCopy = env.home("bob-recv") + "/docs/minutes.txt"
        try FolderSyncTests.eventually("minutes.txt reaches bob", timeout: 30) { FileManager.default.fileExists(atPath: bobCopy) }
        try FileManager.default.removeItem(atPath: docs + "/minutes.txt")
        try FolderSyncTests.eventually("the deletion reaches bob", timeout: 30) { !FileManager.default.fileExists(atPath: bobCopy) }

        let (cookie, csrf) = try DashboardTests.login(port, link: link)
        func call(_ body: String) throws -> [String: Any] {
            let answer = try DashboardTests.exchange(port, DashboardTests.post(body, port: port, cookie: cookie, csrf: csrf, origin: "http://127.0.0.1:\(port)"))
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any], "\(answer.body)")
            try #require(object["ok"] as? Bool == true, "\(answer.body)")
            return try #require(object["result"] as? [String: Any])
        }
        // "Recently deleted" in the folder: its history, the deletions bob keeps.
        let history = try call(#"{"op":"history","path":"\#(docs)"}"#)
        let deleted = try #require((history["versions"] as? [[String: Any]] ?? []).first {
            $0["path"] as? String == "minutes.txt" && $0["reason"] as? String == "peer-delete" && $0["held"] as? Bool == true
        }, "\(history)")
        let id = try #require(deleted["id"] as? String)
        let restored = try call(#"{"op":"restore","path":"\#(docs)/minutes.txt","version":"\#(id)"}"#)
        #expect((restored["restored"] as? [[String: Any]])?.count == 1, "\(restored)")
        #expect(try String(contentsOfFile: docs + "/minutes.txt", encoding: .utf8) == "minutes of the meeting")
        try FolderSyncTests.eventually("the restored file reaches bob", timeout: 30) {
            (try? String(contentsOfFile: bobCopy, encoding: .utf8)) == "minutes of the meeting"
        }
        // The page has the views that ask for it.
        let script = try DashboardTests.exchange(port, DashboardTests.get("/app.js", port: port, cookie: cookie))
        #expect(script.body.contains("Recently deleted") && script.body.contains("op: 'restore'"))
    }

    /// Alice with a dashboard and bob, paired, each receiving under HOME-recv, and an empty
    /// directory `docs` to share.
    static func pair(_ env: SyncpeerRunner) throws -> (alice: DaemonProcess, bob: DaemonProcess, port: UInt16, link: String) {
        for name in ["alice-recv", "bob-recv", "docs"] {
            try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true)
        }
        let (alice, port, link) = try DashboardTests.daemon(env, "alice", arguments: ["--auto-accept", "--receive-dir", env.home("alice-recv")],
                                                            environment: FolderSyncTests.environment)
        let bob = try FolderSyncTests.Trio.daemon(env, "bob", environment: FolderSyncTests.environment)
        _ = try env.pair(alice, bob, autoAccepted: true)
        return (alice, bob, port, link)
    }
}
