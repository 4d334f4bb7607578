internal import FoundationEssentials
package import SyncEngine

/// The login codes already used, by nonce, until they expire: kept in `HOME/gui-used` (mode
/// 0600) as well as in memory, so a code that logged in once is refused after a daemon
/// restart too. Only a code whose MAC is right is ever recorded (only the key's holder can
/// make one), and at most `limit` are kept: beyond, logins wait for the oldest to expire
/// rather than forget a code that could still be replayed.
///
/// The file is one `TIME NONCE` line per code, replaced whole (a private temporary file,
/// synced, renamed) on each login.
package struct UsedLoginCodes: Sendable {
    /// At most this many codes younger than `DashboardAccess.loginLifetime` (+ slack).
    static let limit = 256
    /// What the file may hold (bytes read at most): `limit` lines, with room to spare.
    static let fileLimit = 64 * 1024

    /// Where they are kept; nil keeps them in memory only (unit tests).
    let path: String?
    private(set) var nonces: [String: Int64] = [:]

    /// An empty list kept in memory only.
    package init() { path = nil }

    static func path(_ home: NodeHome) -> String { home.path + "/gui-used" }

    /// The list the home keeps. A file that is not a regular file of this user, mode 0600,
    /// is refused (the daemon does not start its dashboard) rather than trusted or replaced.
    package static func load(home: NodeHome) throws(EngineError) -> UsedLoginCodes {
        var codes = UsedLoginCodes(path: path(home))
        guard let bytes = try PrivateFile.read(path(home), limit: fileLimit) else { return codes }
        // Lines that are not `TIME NONCE` are skipped; the next login writes the file anew.
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n").prefix(limit) {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let time = Int64(parts[0]), isNonce(parts[1]) else { continue }
            codes.nonces[String(parts[1])] = time
        }
        return codes
    }

    private init(path: String) { self.path = path }

    static func isNonce(_ text: Substring) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Records `nonce` (of a code made at `time`) as used; false when it was used already,
    /// when `limit` unexpired codes are kept, or when the file cannot be written (a code
    /// whose use is not on disk could be replayed after a restart).
    mutating func use(_ nonce: String, time: Int64, now: Int64) -> Bool {
        nonces = nonces.filter { now - $0.value <= DashboardAccess.loginLifetime + 10 }
        guard nonces[nonce] == nil, nonces.count < Self.limit else { return false }
        nonces[nonce] = time
        guard save() else {
            nonces[nonce] = nil
            return false
        }
        return true
    }

    private func save() -> Bool {
        guard let path else { return true }
        let text = nonces.sorted { $0.value < $1.value }.map { "\($0.value) \($0.key)\n" }.joined()
        do { try PrivateFile.write(Array(text.utf8), to: path, replacing: true) } catch { return false }
        return true
    }
}
