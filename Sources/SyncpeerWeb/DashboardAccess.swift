internal import FoundationEssentials
internal import Glibc
internal import PeerCrypto
internal import PeerNet
package import SyncEngine
internal import Synchronization

/// Who may use the dashboard: whoever can read the home's key. The key (32 random bytes,
/// hex) lives in `HOME/gui-token`, mode 0600, and never leaves this machine's files:
///
/// - `syncpeer gui` makes a **login code** from it, `TIME.NONCE.MAC` (MAC = keyed BLAKE2b of
///   the time and nonce), good once (across restarts: `UsedLoginCodes`) and for two minutes.
///   It never goes on a command line or into an environment (which other local users can
///   read in /proc): the browser is opened on a 0600 page in the home that POSTs the code to
///   `/login` (`DashboardLoginPage`); a link printed for the user to paste is worthless soon
///   after.
/// - The login answers with a **session**: a random ID of this daemon run, in an HttpOnly,
///   SameSite=Strict cookie named after the port (`syncpeer-gui-PORT`, so two homes'
///   dashboards do not log each other out). A restart ends every session; a cookie that
///   reached another server on 127.0.0.1 (cookies are not kept apart by port) is good only
///   for this run.
/// - Every state-changing request also carries the page's CSRF token, and the Host and
///   Origin headers must name the address the server listens on (a DNS-rebinding page has
///   another Host, a foreign page another Origin).
package final class DashboardAccess: Sendable {
    /// How long a login code is good for, and at most how many sessions one run keeps.
    static let loginLifetime: Int64 = 120
    static let maxSessions = 256

    let key: [UInt8]
    /// This run's CSRF token (embedded in the page, sent back in `X-CSRF-Token`).
    package let csrf: String
    /// The `host:port` values a request's Host may hold.
    let hosts: Set<String>
    /// The session cookie's name.
    let cookieName: String
    private let state: Mutex<(sessions: [String], usedCodes: UsedLoginCodes)>

    package init(key: String, port: UInt16, hosts: Set<String>, csrf: String = DashboardAccess.randomHex(),
                usedCodes: UsedLoginCodes = UsedLoginCodes()) {
        self.state = Mutex(([], usedCodes))
        self.key = Self.bytes(fromHex: key)
        self.csrf = csrf
        self.hosts = hosts
        self.cookieName = "syncpeer-gui-\(port)"
    }

    /// The Host values that name `host:port` (a numeric address: the server listens on that
    /// one only, so a name such as `localhost`, which may reach another server on `::1`, is
    /// not one of them).
    package static func hostNames(host: String, port: UInt16) -> Set<String> {
        [host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"]
    }

    package static func randomHex(_ count: Int = 32) -> String {
        SecureBytes.random(count: count).withUnsafeBytes { hex($0) }
    }

    static func bytes(fromHex text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let h = hexValue(high), let l = hexValue(low) else { return [] }
            bytes.append(h << 4 | l)
        }
        return bytes
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    package static var unixNow: Int64 { Int64(Date().timeIntervalSince1970) }

    // MARK: The key file

    static func tokenPath(_ home: NodeHome) -> String { home.path + "/gui-token" }

    /// The home's key, made on first use (never replacing one another daemon made meanwhile).
    package static func loadOrCreateToken(home: NodeHome) throws(EngineError) -> String {
        if let token = try loadToken(home: home) { return token }
        try PrivateFile.write(Array((randomHex() + "\n").utf8), to: tokenPath(home), replacing: false)
        guard let token = try loadToken(home: home) else { throw .invalidArgument("\(tokenPath(home)) vanished while it was made") }
        return token
    }

    /// The home's key, or nil when there is none yet. A file that is not a regular file of
    /// this user, readable by others, or not a key, is refused rather than used.
    package static func loadToken(home: NodeHome) throws(EngineError) -> String? {
        let path = tokenPath(home)
        guard let contents = try PrivateFile.read(path, limit: 80) else { return nil }
        let words = String(decoding: contents, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard words.count == 1, let token = words.first.map(String.init), token.count == 64, bytes(fromHex: token).count == 32 else {
            throw .invalidArgument("\(path) does not hold a dashboard key; remove it to make a new one")
        }
        return token
    }

    // MARK: Login codes

    /// A login code for the URL: good once, for `loginLifetime` seconds.
    package static func loginCode(key: String, now: Int64 = unixNow, nonce: String = randomHex(16)) -> String {
        "\(now).\(nonce).\(mac(key: bytes(fromHex: key), time: now, nonce: nonce))"
    }

    private static func mac(key: [UInt8], time: Int64, nonce: String) -> String {
        hex(BLAKE2b.hash(parts: [Array("syncpeer-gui-login|\(time)|\(nonce)".utf8)], length: 32, key: key))
    }

    /// Whether `code` is a login code of this key, fresh, and not used before (it is used now).
    func redeem(_ code: String?, now: Int64 = DashboardAccess.unixNow) -> Bool {
        guard let parts = code?.split(separator: ".", omittingEmptySubsequences: false), parts.count == 3,
              let time = Int64(parts[0]), parts[1].count == 32, parts[2].count == 64, !key.isEmpty else { return false }
        guard time <= now + 5, now - time <= Self.loginLifetime else { return false }
        let nonce = String(parts[1])
        guard Self.same(String(parts[2]), Self.mac(key: key, time: time, nonce: nonce)) else { return false }
        return state.withLock { $0.usedCodes.use(nonce, time: time, now: now) }
    }

    // MARK: Sessions

    /// A new session of this run; its cookie (`Set-Cookie`).
    func openSession() -> String {
        let id = Self.randomHex()
        state.withLock { state in
            state.sessions.append(id)
            if state.sessions.count > Self.maxSessions { state.sessions.removeFirst() }
        }
        return "\(cookieName)=\(id); Path=/; HttpOnly; SameSite=Strict"
    }

    /// Whether the request carries a session of this run in its cookie.
    func hasSession(_ request: HTTPRequest) -> Bool {
        guard let cookies = request.header("cookie") else { return false }
        let sessions = state.withLock { $0.sessions }
        for pair in cookies.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { HTTPText.trimmed($0) }
            if parts.count == 2, parts[0] == cookieName, sessions.contains(where: { Self.same(parts[1], $0) }) { return true }
        }
        return false
    }

    // MARK: Requests

    /// Whether the request's Host names this server (refuses DNS rebinding).
    func hostAllowed(_ request: HTTPRequest) -> Bool {
        guard let host = request.header("host")?.lowercased() else { return false }
        return hosts.contains(host)
    }

    /// Whether an Origin header, if sent, is this server's; `required` for state changes.
    func originAllowed(_ request: HTTPRequest, required: Bool) -> Bool {
        guard let origin = request.header("origin")?.lowercased() else { return !required }
        guard origin.hasPrefix("http://") else { return false }
        return hosts.contains(String(origin.dropFirst("http://".count)))
    }

    /// Whether a login may come from the request's origin: none, this server, or `null` (the
    /// page `syncpeer gui` writes is a file, whose form posts with `Origin: null`). The code
    /// in the body is the credential; no other route takes `null`.
    func loginOriginAllowed(_ request: HTTPRequest) -> Bool {
        request.header("origin")?.lowercased() == "null" || originAllowed(request, required: false)
    }

    /// Whether a state-changing request carries this run's CSRF token.
    func hasCSRF(_ request: HTTPRequest) -> Bool {
        request.header("x-csrf-token").map { Self.same($0, csrf) } ?? false
    }

    private static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        return x.count == y.count && constantTimeEqual(x, y)
    }
}
