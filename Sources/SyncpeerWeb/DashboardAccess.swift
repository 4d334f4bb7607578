internal import Foundation
internal import Glibc
internal import PeerCrypto
public import SyncEngine

/// Who may use the dashboard: whoever holds the home's secret. The secret (32 random
/// bytes, hex) lives in `HOME/gui-token`, mode 0600, kept across restarts; it is handed
/// over once in the URL `syncpeer gui` prints, then held by the browser in an HttpOnly,
/// SameSite=Strict cookie. Every state-changing request also carries the page's CSRF
/// token, and the Host and Origin headers must name the address the server listens on
/// (a DNS-rebinding page has another Host; a foreign page another Origin).
public struct DashboardAccess: Sendable {
    public static let cookieName = "syncpeer-gui"
    /// The home's secret.
    public let token: String
    /// This run's CSRF token (embedded in the page, sent back in `X-CSRF-Token`).
    public let csrf: String
    /// The `host:port` values a request's Host may hold.
    let hosts: Set<String>

    public init(token: String, csrf: String = DashboardAccess.randomHex(), hosts: Set<String>) {
        self.token = token
        self.csrf = csrf
        self.hosts = hosts
    }

    /// The Host values that name `host:port`: itself, and for loopback the usual names of it.
    public static func hostNames(host: String, port: UInt16) -> Set<String> {
        var names: Set<String> = [host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"]
        if host == "127.0.0.1" || host == "::1" || host == "localhost" {
            names.formUnion(["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)"])
        }
        return names
    }

    public static func randomHex(_ count: Int = 32) -> String {
        SecureBytes.random(count: count).withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
    }

    /// The home's secret, made (0600, exclusively) on first use. A file that is not a
    /// regular file of this user, or readable by others, is refused rather than used.
    public static func loadOrCreateToken(home: NodeHome) throws(EngineError) -> String {
        let path = home.path + "/gui-token"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 {
            let token = randomHex()
            let bytes = Array((token + "\n").utf8)
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            let synced = fsync(fd) == 0
            close(fd)
            guard written == bytes.count, synced else { throw .invalidArgument("cannot write \(path): \(String(cString: strerror(errno)))") }
            return token
        }
        guard errno == EEXIST else { throw .invalidArgument("cannot create \(path): \(String(cString: strerror(errno)))") }
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid(), info.st_mode & 0o077 == 0 else {
            throw .invalidArgument("\(path) must be a regular file of this user, mode 0600; remove it to make a new one")
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw .invalidArgument("cannot read \(path)") }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count == 64, token.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            throw .invalidArgument("\(path) does not hold a dashboard key; remove it to make a new one")
        }
        return token
    }

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

    /// Whether the request carries the secret in its cookie.
    func hasSession(_ request: HTTPRequest) -> Bool {
        guard let cookies = request.header("cookie") else { return false }
        for pair in cookies.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2, parts[0] == Self.cookieName, Self.same(parts[1], token) { return true }
        }
        return false
    }

    /// Whether `given` is the secret (the one-time URL's `token`).
    func isToken(_ given: String?) -> Bool { given.map { Self.same($0, token) } ?? false }

    /// Whether a state-changing request carries this run's CSRF token.
    func hasCSRF(_ request: HTTPRequest) -> Bool {
        request.header("x-csrf-token").map { Self.same($0, csrf) } ?? false
    }

    /// The cookie that holds the session once the URL's token was checked.
    var sessionCookie: String { "\(Self.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict" }

    private static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        return x.count == y.count && constantTimeEqual(x, y)
    }
}
