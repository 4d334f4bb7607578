import Foundation
import Testing

/// Issue 41, point 3 in `status` and on the dashboard: a folder counts the peers' changes its
/// roles keep out ("remote changes not applied") and its own changes kept back from
/// receive-only peers ("locally changed"), in `status` (text and JSON) and on the page.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct RoleCountsTests {
    @Test func statusAndTheDashboardCountWhatTheRolesKeepApart() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, bob, port, link) = try DashboardVersionsTests.pair(env)
        defer { alice.stop(); bob.stop() }
        let docs = env.home("docs")
        for name in ["a.txt", "d.txt", "e.txt"] { try name.write(toFile: docs + "/" + name, atomically: true, encoding: .utf8) }
        try #require(try env.cli(alice, ["share", docs, "--with", "bob"]).status == 0)
        let bobDocs = env.home("bob-recv") + "/docs"
        try FolderSyncTests.eventually("the files reach bob", timeout: 30) { FileManager.default.fileExists(atPath: bobDocs + "/e.txt") }
        let role = try env.cli(alice, ["role", docs, "bob", "receive-only", "--no-deletes"])
        try #require(role.status == 0, "\(role.stderr)")

        // Bob adds b.txt (applied here); then he deletes d.txt (not applied here: no deletes)
        // and alice edits his b.txt (not sent to bob).
        try "bob's b".write(toFile: bobDocs + "/b.txt", atomically: true, encoding: .utf8)
        try FolderSyncTests.eventually("bob's file reaches alice", timeout: 30) {
            (try? String(contentsOfFile: docs + "/b.txt", encoding: .utf8)) == "bob's b"
        }
        try FileManager.default.removeItem(atPath: bobDocs + "/d.txt")
        try "alice's b".write(toFile: docs + "/b.txt", atomically: true, encoding: .utf8)
        func counts() -> (notApplied: Int?, locallyChanged: Int?) {
            let status = try? VersionsTests.json(env, alice, ["status"])
            let folder = (status?["folders"] as? [[String: Any]])?.first
            return (folder?["notApplied"] as? Int, folder?["locallyChanged"] as? Int)
        }
        try FolderSyncTests.eventually("alice's status counts one of each", timeout: 30) { counts() == (1, 1) }
        let text = try env.cli(alice, ["status"])
        #expect(text.stdout.contains("1 remote change(s) not applied here") && text.stdout.contains("1 path(s) locally changed"),
                "\(text.stdout)")

        // The dashboard's folder list carries them, and its page shows them.
        let (cookie, csrf) = try DashboardTests.login(port, link: link)
        let answer = try DashboardTests.exchange(port, DashboardTests.post(#"{"op":"folders"}"#, port: port, cookie: cookie, csrf: csrf,
                                                                            origin: "http://127.0.0.1:\(port)"))
        #expect(answer.body.contains(#""notApplied":1"#) && answer.body.contains(#""locallyChanged":1"#), "\(answer.body)")
        let script = try DashboardTests.exchange(port, DashboardTests.get("/app.js", port: port, cookie: cookie))
        #expect(script.body.contains("f.notApplied") && script.body.contains("f.locallyChanged"))

        // revert: bob's b.txt is back, the local change and its count gone; bob's deletion stays out.
        let reverted = try env.cli(alice, ["revert", docs, "--json"])
        try #require(reverted.status == 0, "\(reverted.stderr)")
        var last: (Int?, Int?) = (nil, nil)
        try? FolderSyncTests.eventually("the count follows the revert", timeout: 15) {
            last = counts()
            return last == (1, 0)
        }
        #expect(last == (1, 0), "\(last) \(reverted.stdout) \((try? env.cli(alice, ["changes", docs]).stdout) ?? "")")
        #expect((try? String(contentsOfFile: docs + "/b.txt", encoding: .utf8)) == "bob's b")
        _ = bob
    }
}
