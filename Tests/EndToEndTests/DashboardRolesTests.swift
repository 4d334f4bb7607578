import Foundation
import Testing

/// Issue 41, points 3 and 5 on the dashboard: a member's role is set from the page, and a
/// held mass change is applied with a button, through the same session, CSRF token and
/// Origin checks as every other change (a request from another origin is refused).
@Suite struct DashboardRolesTests {
    @Test func aPageSetsARoleAndAppliesAHeldMassChange() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, bob, port, link) = try DashboardVersionsTests.pair(env)
        defer { alice.stop(); bob.stop() }
        let docs = env.home("docs")
        for name in ["a.txt", "b.txt", "c.txt"] { try name.write(toFile: docs + "/" + name, atomically: true, encoding: .utf8) }
        let shared = try env.cli(alice, ["share", docs, "--with", "bob"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let guarded = try env.cli(alice, ["guard", docs, "--files", "1"])
        try #require(guarded.status == 0, "\(guarded.stderr)")
        let bobDocs = env.home("bob-recv") + "/docs"
        try FolderSyncTests.eventually("the files reach bob", timeout: 30) { FileManager.default.fileExists(atPath: bobDocs + "/c.txt") }

        let (cookie, csrf) = try DashboardTests.login(port, link: link)
        func call(_ body: String, origin: String = "http://127.0.0.1:\(port)") throws -> (ok: Bool, body: String, result: [String: Any]) {
            let answer = try DashboardTests.exchange(port, DashboardTests.post(body, port: port, cookie: cookie, csrf: csrf, origin: origin))
            let object = (try? JSONSerialization.jsonObject(with: Data(answer.body.utf8))) as? [String: Any]
            return (object?["ok"] as? Bool == true, answer.body, object?["result"] as? [String: Any] ?? [:])
        }
        // Bob's role: receive-only, from the page; the status shows it, then both again.
        let set = try call(#"{"op":"role","dir":"\#(docs)","peer":"bob","role":"receive-only"}"#)
        #expect(set.ok, "\(set.body)")
        let role = try env.cli(alice, ["status", "--json"])
        #expect(role.stdout.contains(#""role":"receive-only""#), "\(role.stdout)")
        #expect(try call(#"{"op":"role","dir":"\#(docs)","peer":"bob","role":"both"}"#).ok)

        // Bob deletes two of the three files: more than the guard's one file, held on alice.
        try FileManager.default.removeItem(atPath: bobDocs + "/a.txt")
        try FileManager.default.removeItem(atPath: bobDocs + "/b.txt")
        try FolderSyncTests.eventually("the mass change held on alice", timeout: 30) {
            (try? env.cli(alice, ["status", "--json"]).stdout.contains(#""affected":2"#)) == true
        }
        #expect(FileManager.default.fileExists(atPath: docs + "/a.txt"))
        // Another origin is refused; the page's own applies it.
        let foreign = try call(#"{"op":"confirm","dir":"\#(docs)"}"#, origin: "http://evil.example")
        #expect(!foreign.ok, "\(foreign.body)")
        #expect(FileManager.default.fileExists(atPath: docs + "/a.txt"))
        let confirmed = try call(#"{"op":"confirm","dir":"\#(docs)"}"#)
        #expect(confirmed.ok, "\(confirmed.body)")
        try FolderSyncTests.eventually("the deletions applied on alice", timeout: 30) {
            !FileManager.default.fileExists(atPath: docs + "/a.txt") && !FileManager.default.fileExists(atPath: docs + "/b.txt")
        }
        // The page has the controls that send them.
        let script = try DashboardTests.exchange(port, DashboardTests.get("/app.js", port: port, cookie: cookie))
        #expect(script.body.contains("op: 'confirm'") && script.body.contains("op: 'role'"))
    }
}
