import Foundation
import Glibc
import Testing

/// The web dashboard of a real daemon (`daemon --gui`), spoken to as a browser would, over
/// raw HTTP/1.1 on loopback: the key, the cookie, the CSRF token, Host and Origin checks,
/// the API as a client of the control protocol, and live events.
@Suite struct DashboardTests {
    /// One HTTP exchange: the request as bytes, the whole answer (the server closes).
    struct Answer {
        let status: Int
        let head: String
        let body: String
        func header(_ name: String) -> String? {
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
        }
    }

    static func connect(_ port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0, "cannot connect to the dashboard: errno \(errno)")
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    static func exchange(_ port: UInt16, _ request: String) throws -> Answer {
        let fd = try connect(port)
        defer { close(fd) }
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        shutdown(fd, Int32(SHUT_WR))  // all of it: a request cut short is answered at once
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            data += buffer[0..<n]
        }
        let text = String(decoding: data, as: UTF8.self)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        return Answer(status: status, head: head, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    /// A daemon with its dashboard on a free loopback port, and the link `syncpeer gui` prints.
    static func daemon(_ env: SyncpeerRunner, _ name: String, arguments: [String] = [],
                       environment: [String: String] = [:]) throws -> (DaemonProcess, port: UInt16, link: String) {
        let daemon = try DaemonProcess(env, name: name, arguments: ["--gui", "127.0.0.1:0"] + arguments, environment: environment)
        let gui = try env.cli(daemon, ["gui", "--no-open", "--json"])
        try #require(gui.status == 0, "gui failed: \(gui.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(gui.stdout.utf8)) as? [String: Any]
        let link = try #require(object?["url"] as? String)
        let port = try #require(URLComponents(string: link)?.port.map(UInt16.init))
        return (daemon, port, link)
    }

    static func get(_ path: String, port: UInt16, host: String? = nil, cookie: String? = nil) -> String {
        "GET \(path) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\n" + (cookie.map { "Cookie: \($0)\r\n" } ?? "") + "\r\n"
    }

    static func post(_ body: String, port: UInt16, cookie: String, csrf: String?, origin: String?) -> String {
        "POST /api HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Cookie: \(cookie)\r\n" + (csrf.map { "X-CSRF-Token: \($0)\r\n" } ?? "") + (origin.map { "Origin: \($0)\r\n" } ?? "") + "\r\n" + body
    }

    /// Logs in with the link's key; returns the session cookie and the page's CSRF token.
    static func login(_ port: UInt16, link: String) throws -> (cookie: String, csrf: String) {
        let path = String(link.dropFirst("http://127.0.0.1:\(port)".count))
        let redirect = try exchange(port, get(path, port: port))
        #expect(redirect.status == 303 && redirect.header("Location") == "/", "\(redirect.head)")
        let setCookie = try #require(redirect.header("Set-Cookie"))
        #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"), "\(setCookie)")
        let cookie = String(try #require(setCookie.split(separator: ";").first))
        let page = try exchange(port, get("/", port: port, cookie: cookie))
        #expect(page.status == 200, "\(page.head)")
        #expect(page.header("Content-Security-Policy")?.contains("default-src 'self'") == true)
        let marker = "name=\"csrf-token\" content=\""
        let start = try #require(page.body.range(of: marker)?.upperBound, "no CSRF token in the page")
        let csrf = String(page.body[start...].prefix { $0 != "\"" })
        #expect(csrf.count == 64, "the page's CSRF token is '\(csrf)'")
        return (cookie, csrf)
    }

    @Test func thePageNeedsTheKeyAndStateChangesNeedTheCSRFTokenAndTheOrigin() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, port, link) = try Self.daemon(env, "alice")
        defer { alice.stop() }
        // The key file is the user's alone.
        var info = stat()
        #expect(stat(alice.home + "/gui-token", &info) == 0 && info.st_mode & 0o777 == 0o600)

        #expect(try Self.exchange(port, Self.get("/", port: port)).status == 401, "the page without the key")
        #expect(try Self.exchange(port, Self.get("/app.js", port: port)).status == 401)
        #expect(try Self.exchange(port, Self.get("/events", port: port)).status == 401)
        #expect(try Self.exchange(port, Self.get("/?login=1.2.3", port: port)).status == 401)
        // The key itself is not a login code, nor a cookie.
        let key = try String(contentsOfFile: alice.home + "/gui-token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try Self.exchange(port, Self.get("/?login=" + key, port: port)).status == 401)
        #expect(try Self.exchange(port, Self.get("/", port: port, cookie: "syncpeer-gui-\(port)=\(key)")).status == 401)
        let (cookie, csrf) = try Self.login(port, link: link)
        // The link was good once.
        let path = String(link.dropFirst("http://127.0.0.1:\(port)".count))
        #expect(try Self.exchange(port, Self.get(path, port: port)).status == 401, "a login link worked twice")
        #expect(try Self.exchange(port, Self.get("/app.js", port: port, cookie: cookie)).status == 200)
        // DNS rebinding: a page of evil.example that resolves to 127.0.0.1 sends its own Host.
        #expect(try Self.exchange(port, Self.get("/", port: port, host: "evil.example:\(port)", cookie: cookie)).status == 421)
        // Only the embedded assets exist: no path reaches the disk.
        #expect(try Self.exchange(port, Self.get("/../../etc/passwd", port: port, cookie: cookie)).status == 404)
        #expect(try Self.exchange(port, Self.get("/web/index.html", port: port, cookie: cookie)).status == 404)

        let origin = "http://127.0.0.1:\(port)"
        let peers = #"{"op":"peers"}"#
        #expect(try Self.exchange(port, Self.post(peers, port: port, cookie: cookie, csrf: nil, origin: origin)).status == 403, "no CSRF token")
        #expect(try Self.exchange(port, Self.post(peers, port: port, cookie: cookie, csrf: String(repeating: "1", count: 64), origin: origin)).status == 403)
        #expect(try Self.exchange(port, Self.post(peers, port: port, cookie: cookie, csrf: csrf, origin: "http://evil.example")).status == 403)
        #expect(try Self.exchange(port, Self.post(peers, port: port, cookie: cookie, csrf: csrf, origin: nil)).status == 403, "a POST without Origin")
        let answer = try Self.exchange(port, Self.post(peers, port: port, cookie: cookie, csrf: csrf, origin: origin))
        #expect(answer.status == 200)
        let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
        #expect(object?["ok"] as? Bool == true && object?["result"] is [Any], "\(answer.body)")
        // The page may not name paths on this machine.
        let send = try Self.exchange(port, Self.post(#"{"op":"send","path":"/etc/passwd","peer":"bob"}"#, port: port, cookie: cookie, csrf: csrf, origin: origin))
        #expect(send.body.contains("\"ok\":false") && send.body.contains("invalidArgument"), "\(send.body)")
        // Malformed input gets a status, and the server goes on serving.
        #expect(try Self.exchange(port, "GARBAGE\r\n\r\n").status == 400)
        #expect(try Self.exchange(port, Self.get("/", port: port, cookie: cookie)).status == 200)
    }

    @Test func eventsReachThePageLiveAndTheAPIAnswersInvitations() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, port, link) = try Self.daemon(env, "alice")
        defer { alice.stop() }
        let bob = try DaemonProcess(env, name: "bob", arguments: ["--gui", "off"])
        defer { bob.stop() }
        let (cookie, csrf) = try Self.login(port, link: link)
        // The event stream, read as EventSource reads it.
        let fd = try Self.connect(port)
        defer { close(fd) }
        let request = Array(Self.get("/events", port: port, cookie: cookie).utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received = ""
        func readUntil(_ needle: String) -> Bool {
            var buffer = [UInt8](repeating: 0, count: 16_384)
            let deadline = Date().addingTimeInterval(30)
            while !received.contains(needle), Date() < deadline {
                let n = read(fd, &buffer, buffer.count)
                if n <= 0 { break }
                received += String(decoding: buffer[0..<n], as: UTF8.self)
            }
            return received.contains(needle)
        }
        #expect(readUntil("event: resync"), "\(received)")
        #expect(received.contains("Content-Type: text/event-stream"))
        // Bob invites alice: the page sees the invitation and answers it through the API.
        let pairing = try PairingProcess(env, from: bob, to: alice)
        #expect(readUntil("\"event\":\"invitation\""), "\(received)")
        let invitation = try alice.waitFor("invitation")
        let id = try #require(invitation["invitation"] as? String)
        let accept = try Self.exchange(port, Self.post(#"{"op":"accept","invitation":"\#(id)"}"#, port: port, cookie: cookie, csrf: csrf, origin: "http://127.0.0.1:\(port)"))
        #expect(accept.body.contains("\"ok\":true"), "\(accept.body)")
        let result = try pairing.finish()
        #expect(result.status == 0, "pair failed: \(result.stderr)")
        #expect(readUntil("\"state\":\"connected\""), "\(received)")
    }

    /// Mangled requests against the live server (bytes flipped, inserted, cut; random
    /// bytes): each gets an answer or a closed connection, and the server serves on.
    @Test func mangledRequestsAgainstTheLiveServerLeaveItServing() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, port, link) = try Self.daemon(env, "alice")
        defer { alice.stop() }
        let (cookie, csrf) = try Self.login(port, link: link)
        let seeds = [Self.get("/", port: port, cookie: cookie),
                     Self.post(#"{"op":"peers"}"#, port: port, cookie: cookie, csrf: csrf, origin: "http://127.0.0.1:\(port)")].map { Array($0.utf8) }
        var random = SystemRandomNumberGenerator()
        var statuses: [Int: Int] = [:]
        for round in 0..<300 {
            var input = seeds[round % seeds.count]
            if round % 10 == 9 {
                input = (0..<Int.random(in: 1...400, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) } + [13, 10, 13, 10]
            } else {
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let position = Int.random(in: 0..<input.count, using: &random)
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: input[position] = UInt8.random(in: 0...255, using: &random)
                    case 1: input.insert(UInt8.random(in: 0...255, using: &random), at: position)
                    default: input.remove(at: position)
                    }
                }
            }
            let answer = try Self.exchange(port, String(decoding: input, as: UTF8.self))
            statuses[answer.status, default: 0] += 1
        }
        print("dashboard live fuzz: 300 mangled requests, answers by status: \(statuses.sorted { $0.key < $1.key })")
        #expect(statuses.keys.allSatisfy { $0 == 0 || (200..<600).contains($0) })
        #expect(try Self.exchange(port, Self.get("/", port: port, cookie: cookie)).status == 200, "the server stopped serving")
    }

    @Test func aDashboardBeyondLoopbackNeedsToBeAskedFor() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let result = try env.run(["--home", env.home("carol"), "init", "--name", "carol"])
        try #require(result.status == 0)
        let refused = try env.run(["--home", env.home("carol"), "daemon", "--listen", "127.0.0.1:0", "--no-discovery", "--gui", "0.0.0.0:0"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("--gui-allow-remote"), "\(refused.stderr)")
    }

    /// Issue 45, point 7: a second daemon on the same home is refused by the lock before it
    /// changes any file there, so the running daemon's dashboard address stays and
    /// `syncpeer gui` still finds it.
    @Test func aSecondDaemonRefusedByTheLockLeavesTheDashboardAddress() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let (alice, port, _) = try Self.daemon(env, "alice")
        defer { _ = alice.stop() }
        let second = try env.run(["--home", alice.home, "daemon", "--listen", "127.0.0.1:0", "--no-discovery", "--gui", "127.0.0.1:0"])
        #expect(second.status != 0)
        #expect(second.stderr.contains("another syncpeer daemon"), "\(second.stderr)")
        let address = try? String(contentsOfFile: alice.home + "/gui-address", encoding: .utf8)
        #expect(address?.contains(":\(port)") == true, "gui-address: \(address ?? "gone")")
        let gui = try env.cli(alice, ["gui", "--no-open"])
        #expect(gui.status == 0, "gui after the refused daemon: \(gui.stderr)")
        #expect(gui.stdout.contains(":\(port)/"), "\(gui.stdout)")
    }
}
