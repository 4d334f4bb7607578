import Foundation
import Glibc
import Synchronization
import SyncEngine
@testable import SyncpeerWeb
import Testing

/// The used login codes kept in the home, the login page `syncpeer gui` writes, and the
/// request slots, as pure logic and files (the live server: EndToEndTests/DashboardTests).
@Suite struct DashboardLoginTests {
    static let key = String(repeating: "ab", count: 32)

    static func withHome(_ body: (NodeHome) throws -> Void) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-web-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try body(NodeHome(path: path))
    }

    static func access(_ codes: UsedLoginCodes) -> DashboardAccess {
        DashboardAccess(key: key, port: 8385, hosts: DashboardAccess.hostNames(host: "127.0.0.1", port: 8385), usedCodes: codes)
    }

    /// A code used by one run is refused by the next run of the same home, until it expires
    /// (then forgotten: the file does not grow with use).
    @Test func aUsedCodeIsRefusedByTheNextRunAndForgottenWhenExpired() throws {
        try Self.withHome { home in
            let now: Int64 = 1_800_000_000
            let code = DashboardAccess.loginCode(key: Self.key, now: now)
            #expect(Self.access(try UsedLoginCodes.load(home: home)).redeem(code, now: now + 1))
            var info = stat()
            #expect(stat(home.path + "/gui-used", &info) == 0 && info.st_mode & 0o777 == 0o600)
            let restarted = Self.access(try UsedLoginCodes.load(home: home))
            #expect(!restarted.redeem(code, now: now + 2), "a used code worked again after a restart")
            // Later logins drop what expired from the file.
            #expect(restarted.redeem(DashboardAccess.loginCode(key: Self.key, now: now + 200), now: now + 200))
            #expect(try UsedLoginCodes.load(home: home).nonces.count == 1)
        }
    }

    /// At most `limit` unexpired codes are kept; beyond, a login waits rather than a used
    /// code being forgotten.
    @Test func theListIsBoundedWithoutForgettingALiveCode() {
        let now: Int64 = 1_800_000_000
        let access = Self.access(UsedLoginCodes())
        for _ in 0..<UsedLoginCodes.limit {
            #expect(access.redeem(DashboardAccess.loginCode(key: Self.key, now: now), now: now))
        }
        #expect(!access.redeem(DashboardAccess.loginCode(key: Self.key, now: now), now: now), "past the limit")
        #expect(access.redeem(DashboardAccess.loginCode(key: Self.key, now: now + 200), now: now + 200), "once the others expired")
    }

    @Test func aUsedCodesFileOfAnotherModeIsRefused() throws {
        try Self.withHome { home in
            FileManager.default.createFile(atPath: home.path + "/gui-used", contents: Data(), attributes: [.posixPermissions: 0o644])
            #expect(throws: EngineError.self) { try UsedLoginCodes.load(home: home) }
        }
    }

    /// The page holds the code in a form that posts to `/login`; only this user can read it.
    @Test func theLoginPageIsPrivateAndPostsTheCode() throws {
        try Self.withHome { home in
            let url = try DashboardLoginPage.write(home: home, url: "http://127.0.0.1:8385/", code: "1.ab.cd")
            #expect(url == "file://" + home.path + "/gui-login.html")
            var info = stat()
            #expect(stat(home.path + "/gui-login.html", &info) == 0 && info.st_mode & 0o777 == 0o600)
            let page = try String(contentsOfFile: home.path + "/gui-login.html", encoding: .utf8)
            #expect(page.contains(#"<form method="post" action="http://127.0.0.1:8385/login">"#))
            #expect(page.contains(#"name="code" value="1.ab.cd""#))
        }
    }

    /// Only a login may come from a file's page (`Origin: null`).
    @Test func aNullOriginMayLogInAndNothingElse() {
        let access = Self.access(UsedLoginCodes())
        let request = HTTPRequest(method: "POST", path: "/login", query: [:], version: "HTTP/1.1",
                                  headers: [(name: "Origin", value: "null")], body: [])
        #expect(access.loginOriginAllowed(request))
        #expect(!access.originAllowed(request, required: true))
        var foreign = request
        foreign.headers = [(name: "Origin", value: "http://evil.example")]
        #expect(!access.loginOriginAllowed(foreign))
    }

    /// A newcomer pushes out the reader that waited longest; serving slots are bounded and
    /// never taken from.
    @Test func theOldestReaderMakesRoomAndServingIsBounded() {
        let slots = ConnectionSlots(readers: 2, servers: 1)
        let evicted = Mutex<[Int]>([])
        let first = slots.admit { evicted.withLock { $0.append(1) } }
        let second = slots.admit { evicted.withLock { $0.append(2) } }
        #expect(evicted.withLock { $0 }.isEmpty)
        let third = slots.admit { evicted.withLock { $0.append(3) } }
        #expect(evicted.withLock { $0 } == [1], "the oldest reader")
        slots.leaveReading(first)  // its thread leaves after the eviction: nothing changes
        #expect(slots.taken == (2, 0))
        #expect(slots.startServing(second))
        #expect(!slots.startServing(third), "one serving slot")
        #expect(slots.taken == (0, 1))
        _ = slots.admit {}
        _ = slots.admit {}
        _ = slots.admit {}
        #expect(slots.taken == (2, 1), "readers never take a serving slot")
        slots.finishServing()
        #expect(slots.taken == (2, 0))
    }
}
