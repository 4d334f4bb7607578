import Foundation
import Glibc
import Synchronization
import Testing

/// What another local user could do to the dashboard of a real daemon: read the login code
/// off a command line or an environment in /proc, replay a used code after a restart, hold
/// every request slot with sockets that send a byte a second.
extension DashboardTests {
    static func loginPost(_ code: String, port: UInt16, origin: String? = "null") -> String {
        let body = "code=\(code)"
        return "POST /login HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            + (origin.map { "Origin: \($0)\r\n" } ?? "") + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
    }

    /// `syncpeer gui` with $BROWSER set to a script that records its argv and environment:
    /// neither holds the login code; the browser is given a file of mode 0600 whose form
    /// logs in (once).
    @Test func guiOpensTheBrowserOnAPrivatePageNeverOnTheCode() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let alice = try DaemonProcess(env, name: "alice", arguments: ["--gui", "127.0.0.1:0"])
        defer { alice.stop() }
        let record = env.root.appendingPathComponent("browser").path
        let script = env.root.appendingPathComponent("browser.sh").path
        try """
        #!/bin/sh
        printf '%s\\n' "$0" "$@" > \(record).argv.tmp; env > \(record).env; mv \(record).argv.tmp \(record).argv

        """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        let gui = try env.run(["--home", alice.home, "gui", "--json"], environment: ["BROWSER": script])
        try #require(gui.status == 0, "gui failed: \(gui.stderr)")
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: record + ".argv"), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let argv = try String(contentsOfFile: record + ".argv", encoding: .utf8)
        let environment = try String(contentsOfFile: record + ".env", encoding: .utf8)

        #expect(!argv.contains("login=") && !environment.contains("login="), "a login link on the browser's command line or environment: \(argv)")
        let opened = try #require(argv.split(separator: "\n").dropFirst().first.map(String.init))
        let pagePath = try #require(URL(string: opened)?.path, "the browser was given \(opened)")
        #expect(opened.hasPrefix("file://") && pagePath == alice.home + "/gui-login.html", "\(opened)")
        var info = stat()
        #expect(stat(pagePath, &info) == 0 && info.st_mode & 0o777 == 0o600 && info.st_uid == getuid())
        let page = try String(contentsOfFile: pagePath, encoding: .utf8)
        let marker = #"name="code" value=""#
        let start = try #require(page.range(of: marker)?.upperBound, "no code in the page: \(page)")
        let code = String(page[start...].prefix { $0 != "\"" })
        #expect(code.split(separator: ".").count == 3, "\(code)")
        // The code, and its MAC alone, appear nowhere another user can read.
        let mac = String(code.split(separator: ".").last ?? "")
        #expect(!argv.contains(mac), "the login code is on the browser's command line: \(argv)")
        #expect(!environment.contains(mac), "the login code is in the browser's environment")
        #expect(!gui.stdout.contains(mac), "\(gui.stdout)")

        // The page's form, as a browser posts it from a file (Origin: null), logs in.
        let object = try JSONSerialization.jsonObject(with: Data(gui.stdout.utf8)) as? [String: Any]
        let url = try #require(object?["url"] as? String)
        let port = try #require(URLComponents(string: url)?.port.map(UInt16.init))
        #expect(page.contains("action=\"http://127.0.0.1:\(port)/login\""), "\(page)")
        #expect(try Self.exchange(port, Self.loginPost(code, port: port, origin: "http://evil.example")).status == 403)
        let login = try Self.exchange(port, Self.loginPost(code, port: port))
        #expect(login.status == 200 && login.body.contains("http-equiv=\"refresh\""), "\(login.head)")
        let cookie = String(try #require(login.header("Set-Cookie")?.split(separator: ";").first))
        #expect(try Self.exchange(port, Self.get("/", port: port, cookie: cookie)).status == 200)
        #expect(try Self.exchange(port, Self.loginPost(code, port: port)).status == 401, "the page logged in twice")
        // Origin null opens the login only: the API still refuses it.
        let api = Self.post(#"{"op":"peers"}"#, port: port, cookie: cookie, csrf: String(repeating: "0", count: 64), origin: "null")
        #expect(try Self.exchange(port, api).status == 403)
    }

    /// A code that logged in is refused by the next run of the daemon too.
    @Test func aUsedCodeIsRefusedAfterADaemonRestart() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, port, link) = try Self.daemon(env, "alice")
        _ = try Self.login(port, link: link)
        let path = String(link.dropFirst("http://127.0.0.1:\(port)".count))
        #expect(alice.stop() == 0)
        var info = stat()
        #expect(stat(alice.home + "/gui-used", &info) == 0 && info.st_mode & 0o777 == 0o600)
        let (again, newPort, newLink) = try Self.daemon(env, "alice")
        defer { again.stop() }
        let replay = try Self.exchange(newPort, Self.get(path, port: newPort))
        #expect(replay.status == 401, "a used login code worked after a restart: \(replay.head)")
        _ = try Self.login(newPort, link: newLink)
    }

    /// 40 local sockets sending a byte a second (reconnecting when closed) while a logged-in
    /// page makes its requests: every one is answered.
    @Test func slowSocketsDoNotKeepTheLoggedInUserOut() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, port, link) = try Self.daemon(env, "alice")
        defer { alice.stop() }
        let (cookie, csrf) = try Self.login(port, link: link)
        let head = Array("GET / HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Slow: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 100)
        let stop = Atomic<Bool>(false)
        let reconnects = Atomic<Int>(0)
        let slow = Thread {
            var sockets: [(fd: Int32, sent: Int)] = (0..<40).compactMap { _ in (try? Self.connect(port)).map { ($0, 0) } }
            while !stop.load(ordering: .relaxed) {
                for index in sockets.indices {
                    var probe: UInt8 = 0
                    let closed = recv(sockets[index].fd, &probe, 1, Int32(MSG_DONTWAIT)) >= 0 || errno != EAGAIN
                    if closed, let fd = try? Self.connect(port) {
                        close(sockets[index].fd)
                        sockets[index] = (fd, 0)
                        reconnects.add(1, ordering: .relaxed)
                    }
                    let sent = sockets[index].sent
                    _ = head.withUnsafeBytes { send(sockets[index].fd, $0.baseAddress! + sent % head.count, 1, Int32(MSG_NOSIGNAL)) }
                    sockets[index].sent += 1
                }
                Thread.sleep(forTimeInterval: 1)
            }
            for socket in sockets { close(socket.fd) }
        }
        slow.start()
        defer { stop.store(true, ordering: .relaxed) }
        Thread.sleep(forTimeInterval: 1)
        var statuses: [Int] = []
        for round in 0..<20 {
            let request = round % 2 == 0 ? Self.get("/app.js", port: port, cookie: cookie)
                : Self.post(#"{"op":"status"}"#, port: port, cookie: cookie, csrf: csrf, origin: "http://127.0.0.1:\(port)")
            statuses.append(try Self.exchange(port, request).status)
            Thread.sleep(forTimeInterval: 0.1)
        }
        print("dashboard slow sockets: 40 sending a byte a second, \(reconnects.load(ordering: .relaxed)) reconnects; the logged-in page got \(statuses)")
        #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
    }
}
