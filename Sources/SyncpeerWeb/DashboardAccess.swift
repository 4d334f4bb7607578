internal import Foundation
internal import Glibc
internal import PeerCrypto
public import SyncEngine
internal import Synchronization

/// Who may use the dashboard: whoever can read the home's key. The key (32 random bytes,
/// hex) lives in `HOME/gui-token`, mode 0600, and never leaves this machine's files:
///
/// - `syncpeer gui` makes a **login code** from it, `TIME.NONCE.MAC` (MAC = keyed BLAKE2b of
///   the time and nonce), good once and for two minutes: what the URL carries (and so the
///   browser's command line, history and screenshots) is worthless soon after.
/// - The login answers with a **session**: a random ID of this daemon run, in an HttpOnly,
///   SameSite=Strict cookie named after the port (`syncpeer-gui-PORT`, so two homes'
///   dashboards do not log each other out). A restart ends every session; a cookie that
///   reached another server on 127.0.0.1 (cookies are not kept apart by port) is good only
///   for this run.
/// - Every state-changing request also carries the page's CSRF token, and the Host and
///   Origin headers must name the address the server listens on (a DNS-rebinding page has
///   another Host, a foreign page another Origin).
public final class DashboardAccess: Sendable {
    /// How long a login code is good for, and at most how many sessions one run keeps.
    static let loginLifetime: Int64 = 120
    static let maxSessions = 256

    let key: [UInt8]
    /// This run's CSRF token (embedded in the page, sent back in `X-CSRF-Token`).
    public let csrf: String
    /// The `host:port` values a request's Host may hold.
    let hosts: Set<String>
    /// The session cookie's name.
    let cookieName: String
    private let state = Mutex<(sessions: [String], usedNonces: [String: Int64])>(([], [:]))

    public init(key: String, port: UInt16, hosts: Set<String>, csrf: String = DashboardAccess.randomHex()) {
        self.key = Self.bytes(fromHex: key)
        self.csrf = csrf
        self.hosts = hosts
        self.cookieName = "syncpeer-gui-\(port)"
    }

    /// The Host values that name `host:port` (a numeric address: the server listens on that
    /// one only, so a name such as `localhost`, which may reach another server on `::1`, is
    /// not one of them).
    public static func hostNames(host: String, port: UInt16) -> Set<String> {
        [host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"]
    }

    public static func randomHex(_ count: Int = 32) -> String {
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

    public static var unixNow: Int64 { Int64(Date().timeIntervalSince1970) }

    // MARK: The key file

    static func tokenPath(_ home: NodeHome) -> String { home.path + "/gui-token" }

    /// The home's key, made on first use: written to a private temporary file, synced, then
    /// linked into place (never replacing one another daemon made meanwhile), so the file
    /// is never seen half-written.
    public static func loadOrCreateToken(home: NodeHome) throws(EngineError) -> String {
        if let token = try loadToken(home: home) { return token }
        let path = tokenPath(home)
        let temporary = path + ".new-\(getpid())"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .invalidArgument("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let bytes = Array((randomHex() + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        defer { unlink(temporary) }
        guard written == bytes.count, synced else { throw .invalidArgument("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        guard link(temporary, path) == 0 || errno == EEXIST else {
            throw .invalidArgument("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        guard let token = try loadToken(home: home) else { throw .invalidArgument("\(path) vanished while it was made") }
        return token
    }

    /// The home's key, or nil when there is none yet. A file that is not a regular file of
    /// this user, readable by others, or not a key, is refused rather than used (checked on
    /// the open descriptor: no race with a swapped path).
    public static func loadToken(home: NodeHome) throws(EngineError) -> String? {
        let path = tokenPath(home)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw .invalidArgument("cannot open \(path): \(String(cString: strerror(errno))); remove it to make a new one")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid(), info.st_mode & 0o077 == 0 else {
            throw .invalidArgument("\(path) must be a regular file of this user, mode 0600; remove it to make a new one")
        }
        var buffer = [UInt8](repeating: 0, count: 80)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        let token = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count == 64, bytes(fromHex: token).count == 32 else {
            throw .invalidArgument("\(path) does not hold a dashboard key; remove it to make a new one")
        }
        return token
    }

    // MARK: Login codes

    /// A login code for the URL: good once, for `loginLifetime` seconds.
    public static func loginCode(key: String, now: Int64 = unixNow, nonce: String = randomHex(16)) -> String {
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
        return state.withLock { state -> Bool in
            state.usedNonces = state.usedNonces.filter { now - $0.value <= Self.loginLifetime + 10 }
            guard state.usedNonces[nonce] == nil else { return false }
            state.usedNonces[nonce] = time
            return true
        }
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
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
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

    /// Whether a state-changing request carries this run's CSRF token.
    func hasCSRF(_ request: HTTPRequest) -> Bool {
        request.header("x-csrf-token").map { Self.same($0, csrf) } ?? false
    }

    private static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        return x.count == y.count && constantTimeEqual(x, y)
    }
}
