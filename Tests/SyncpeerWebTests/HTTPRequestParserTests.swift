import Foundation
import SyncEngine
@testable import SyncpeerWeb
import TestKit
import Testing

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite struct HTTPRequestParserTests {
    @Test func aBrowserGetParses() throws {
        let head = "GET /?token=ab%20c&x=1&x=2 HTTP/1.1\r\nHost: 127.0.0.1:8385\r\nCookie:  a=b \r\nAccept: */*\r\n\r\n"
        guard case let .request(request, consumed) = HTTPRequestParser.parse(bytes(head)) else {
            Issue.record("not parsed: \(HTTPRequestParser.parse(bytes(head)))")
            return
        }
        #expect(consumed == head.utf8.count)
        #expect(request.method == "GET" && request.path == "/" && request.version == "HTTP/1.1")
        #expect(request.query == ["token": "ab c", "x": "1"])
        #expect(request.header("HOST") == "127.0.0.1:8385")
        #expect(request.header("cookie") == "a=b")
        #expect(request.body.isEmpty)
    }

    @Test func aPostWaitsForItsWholeBody() {
        let head = "POST /api HTTP/1.1\r\nHost: h\r\nContent-Length: 13\r\n\r\n"
        #expect(HTTPRequestParser.parse(bytes(head + "{\"op\":")) == .bodyPending(total: head.utf8.count + 13))
        guard case let .request(request, consumed) = HTTPRequestParser.parse(bytes(head + "{\"op\":\"peers\"}" + "GET")) else {
            Issue.record("not parsed")
            return
        }
        #expect(String(decoding: request.body, as: UTF8.self) == "{\"op\":\"peers\"")
        #expect(consumed == head.utf8.count + 13)
    }

    @Test func anUnfinishedHeadIsIncomplete() {
        #expect(HTTPRequestParser.parse([]) == .incomplete)
        #expect(HTTPRequestParser.parse(bytes("GET / HTTP/1.1\r\nHost: x\r\n")) == .incomplete)
    }

    /// Each malformed or oversized request gets the status that says what is wrong.
    @Test(arguments: [
        ("GET / HTTP/1.1\r\n\r\n", 400),                                     // no Host
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),               // two Hosts
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        ("GET http://evil/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),               // absolute form
        ("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),                         // two spaces
        ("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),                          // not a token
        ("GET /\u{7F} HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),               // obs-fold
        ("GET / HTTP/1.1\r\nHost: a\u{01}\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", 400),                    // bare LF in a value
        ("GET / HTTP/1.1\r\n: x\r\nHost: a\r\n\r\n", 400),                   // empty name
        ("POST /api HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
        ("POST /api HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST /api HTTP/1.1\r\nHost: a\r\nContent-Length: 1e3\r\n\r\n", 400),
        ("POST /api HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", 400),
        ("POST /api HTTP/1.1\r\nHost: a\r\nContent-Length: 65537\r\n\r\n", 413),
        ("POST /api HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
        ("GET /?a=%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET /?a=%ff HTTP/1.1\r\nHost: a\r\n\r\n", 400),                    // not UTF-8
    ] as [(String, Int)])
    func malformedRequestsAreRefused(_ text: String, _ status: Int) {
        guard case let .invalid(got, _) = HTTPRequestParser.parse(bytes(text)) else {
            Issue.record("accepted: \(text.debugDescription)")
            return
        }
        #expect(got == status, "\(text.debugDescription)")
    }

    @Test func limitsHold() {
        let limits = HTTPLimits()
        let longLine = "GET /" + String(repeating: "a", count: limits.requestLine) + " HTTP/1.1\r\n"
        guard case .invalid(414, _) = HTTPRequestParser.parse(bytes(longLine)) else {
            Issue.record("a long request line was not refused")
            return
        }
        let manyHeaders = "GET / HTTP/1.1\r\nHost: a\r\n" + (0..<70).map { "X-\($0): y\r\n" }.joined() + "\r\n"
        guard case .invalid(431, _) = HTTPRequestParser.parse(bytes(manyHeaders)) else {
            Issue.record("70 headers were not refused")
            return
        }
        // A head that never ends is refused once it passes the limit, not buffered for ever.
        let endless = "GET / HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: limits.head / 6 + 10)
        guard case .invalid(431, _) = HTTPRequestParser.parse(bytes(endless)) else {
            Issue.record("an endless head was not refused")
            return
        }
    }

    /// Random bytes, and valid requests with random bytes flipped, inserted or cut: the
    /// parser always answers (no trap), and what it accepts it took from the buffer.
    @Test func fuzzedInputNeverTrapsAndStaysInBounds() {
        var random = SplitMix64(seed: 0x5EED_0015)
        let seeds = [
            "GET /?token=abc HTTP/1.1\r\nHost: 127.0.0.1:8385\r\nCookie: syncpeer-gui=x\r\n\r\n",
            "POST /api HTTP/1.1\r\nHost: 127.0.0.1:8385\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"op\":\"peers\"}",
            "GET /events HTTP/1.0\r\n\r\n",
        ].map(bytes)
        var accepted = 0, refused = 0, incomplete = 0
        for round in 0..<40_000 {
            var input: [UInt8]
            if round % 4 == 0 {
                input = random.bytes(Int(random.next() % 300))
            } else {
                input = seeds[Int(random.next() % UInt64(seeds.count))]
                for _ in 0..<(1 + Int(random.next() % 4)) {
                    let position = Int(random.next() % UInt64(input.count + 1))
                    switch random.next() % 3 {
                    case 0 where position < input.count: input[position] = UInt8(truncatingIfNeeded: random.next())
                    case 1: input.insert(UInt8(truncatingIfNeeded: random.next()), at: position)
                    default: input.removeSubrange(position...)
                    }
                }
            }
            switch HTTPRequestParser.parse(input) {
            case let .request(request, consumed):
                accepted += 1
                #expect(consumed <= input.count && request.body.count <= HTTPLimits().body)
            case .invalid: refused += 1
            case .incomplete, .bodyPending: incomplete += 1
            }
        }
        print("HTTP fuzz: 40000 inputs, \(accepted) parsed, \(refused) refused, \(incomplete) incomplete")
        #expect(accepted > 0 && refused > 0 && incomplete > 0)
    }
}

@Suite struct DashboardAccessTests {
    static let key = String(repeating: "ab", count: 32)
    let access = DashboardAccess(key: DashboardAccessTests.key, port: 8385, hosts: DashboardAccess.hostNames(host: "127.0.0.1", port: 8385), csrf: "c5")

    private func request(_ headers: [(String, String)]) -> HTTPRequest {
        HTTPRequest(method: "GET", path: "/", query: [:], version: "HTTP/1.1", headers: headers.map { (name: $0.0, value: $0.1) }, body: [])
    }

    @Test func hostMustNameThisServer() {
        #expect(access.hostAllowed(request([("Host", "127.0.0.1:8385")])))
        #expect(!access.hostAllowed(request([("Host", "localhost:8385")])), "localhost may be another server on ::1")
        #expect(!access.hostAllowed(request([("Host", "evil.example:8385")])), "DNS rebinding")
        #expect(!access.hostAllowed(request([("Host", "127.0.0.1:8386")])))
        #expect(!access.hostAllowed(request([])))
    }

    @Test func originMustBeThisServersWhenGivenAndForChanges() {
        #expect(access.originAllowed(request([]), required: false))
        #expect(!access.originAllowed(request([]), required: true))
        #expect(access.originAllowed(request([("Origin", "http://127.0.0.1:8385")]), required: true))
        #expect(!access.originAllowed(request([("Origin", "http://evil.example")]), required: false))
        #expect(!access.originAllowed(request([("Origin", "null")]), required: true))
    }

    /// A login code is good once, for two minutes, and only with this key.
    @Test func aLoginCodeIsGoodOnceAndNotForLong() {
        let now: Int64 = 1_800_000_000
        let code = DashboardAccess.loginCode(key: Self.key, now: now)
        #expect(!access.redeem(code, now: now + 121), "an old code")
        #expect(access.redeem(code, now: now + 1))
        #expect(!access.redeem(code, now: now + 2), "a code used twice")
        #expect(!access.redeem(DashboardAccess.loginCode(key: String(repeating: "cd", count: 32), now: now), now: now), "another key's code")
        #expect(!access.redeem(DashboardAccess.loginCode(key: Self.key, now: now + 60), now: now), "a code from the future")
        let parts = DashboardAccess.loginCode(key: Self.key, now: now).split(separator: ".")
        #expect(!access.redeem("\(now + 5).\(parts[1]).\(parts[2])", now: now + 5), "a code with its time changed")
        #expect(!access.redeem(nil) && !access.redeem("") && !access.redeem(".."))
    }

    /// The cookie is a session of this run (never the key), named after the port.
    @Test func sessionsAreOfThisRunAndTheCSRFTokenIsChecked() {
        let cookie = access.openSession()
        #expect(cookie.hasPrefix("syncpeer-gui-8385=") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"))
        #expect(!cookie.contains(Self.key))
        let pair = String(cookie.split(separator: ";")[0])
        #expect(access.hasSession(request([("Cookie", "x=1; \(pair)")])))
        #expect(!access.hasSession(request([("Cookie", String(pair.dropLast()))])))
        #expect(!access.hasSession(request([("Cookie", "syncpeer-gui-8385=\(Self.key)")])), "the key is not a session")
        let restarted = DashboardAccess(key: Self.key, port: 8385, hosts: access.hosts)
        #expect(!restarted.hasSession(request([("Cookie", pair)])), "a session outlived its run")
        #expect(access.hasCSRF(request([("X-CSRF-Token", "c5")])))
        #expect(!access.hasCSRF(request([("X-CSRF-Token", "c6")])))
    }

    /// Paths typed on the page are full ones (the daemon's working directory means nothing
    /// there), a send runs detached from a path (never a spool file, never held open), and a
    /// folder is accepted into the receive folder only.
    @Test func pathsAndLongAnswersAreNotThePagesToAsk() throws {
        #expect(throws: (any Error).self) { try DashboardServer.check(.send(path: "/etc/passwd", peer: "bob", name: nil, spool: nil)) }
        #expect(throws: (any Error).self) { try DashboardServer.check(.send(path: "/tmp/a", peer: "bob", name: nil, spool: "/tmp/s", detach: true)) }
        #expect(throws: (any Error).self) { try DashboardServer.check(.send(path: "a.txt", peer: "bob", name: nil, spool: nil, detach: true)) }
        #expect(throws: (any Error).self) { try DashboardServer.check(.share(directory: "Documents", peers: ["bob"])) }
        #expect(throws: (any Error).self) { try DashboardServer.check(.rescan(directory: "~/Documents", path: nil)) }
        #expect(throws: (any Error).self) { try DashboardServer.check(.verify(directory: "/tmp/docs")) }
        #expect(throws: (any Error).self) { try DashboardServer.check(.unpair(peer: "bob")) }
        try DashboardServer.check(.send(path: "/tmp/a.txt", peer: "bob", name: nil, spool: nil, detach: true))
        try DashboardServer.check(.share(directory: "/tmp/docs", peers: ["bob"]))
        try DashboardServer.check(.unshare(directory: "/tmp/docs"))
        #expect(throws: (any Error).self) { try DashboardServer.check(.answerOffer(transfer: "ab", accept: true, directory: "/tmp", follow: false)) }
        #expect(throws: (any Error).self) { try DashboardServer.check(.answerOffer(transfer: "ab", accept: true, directory: nil, follow: true)) }
        try DashboardServer.check(.answerOffer(transfer: "ab", accept: true, directory: nil, follow: false))
        try DashboardServer.check(.peers)
    }

    /// A dropped file's name from the browser is one path component; only a request that
    /// starts as an upload may take the larger body limit.
    @Test func anUploadIsOneNameAndSaysSoFirst() throws {
        for bad in ["", ".", "..", "a/b", "../x", "/etc/passwd", "a\u{0}b", String(repeating: "x", count: 256)] {
            #expect(throws: (any Error).self, "\(bad)") { try DashboardServer.checkUploadName(bad) }
        }
        try DashboardServer.checkUploadName("report (final).pdf")
        try DashboardServer.checkUploadName("..hidden")
        #expect(DashboardServer.startsUpload(Array("POST /upload?name=a&peer=b HTTP/1.1\r\n".utf8)))
        #expect(!DashboardServer.startsUpload(Array("POST /api HTTP/1.1\r\n".utf8)))
        #expect(!DashboardServer.startsUpload(Array("GET /upload?name=a HTTP/1.1\r\n".utf8)))
    }
}

@Suite struct DashboardAssetsTests {
    /// The embedded copy is the files in web/ (run `make assets` after changing them).
    @Test func theEmbeddedAssetsAreTheFilesInWeb() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for (name, embedded) in DashboardAssets.files {
            var text = try String(contentsOf: root.appendingPathComponent("web/\(name)"), encoding: .utf8)
            if text.hasSuffix("\n") { text.removeLast() }
            #expect(text == embedded, "web/\(name) differs from its embedded copy: run 'make assets'")
        }
        #expect(DashboardAssets.indexHTML.contains("{{CSRF}}"))
    }
}
