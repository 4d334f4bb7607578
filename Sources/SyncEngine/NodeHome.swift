internal import FoundationEssentials
internal import PeerFiles

/// The directory that holds one node's state: its identity key, its index and (later) its
/// control socket and partial transfers. Chosen by `--home`, else `$SYNCPEER_HOME`, else
/// `$XDG_DATA_HOME/syncpeer`, else `~/.local/share/syncpeer`.
package struct NodeHome: Sendable, Equatable {
    /// Absolute path of the home directory.
    package let path: String

    package init(path: String) {
        self.path = URL(fileURLWithPath: path).standardizedFileURL.path
    }

    /// Resolves the home from an explicit option and the environment.
    package static func resolve(explicit: String?, environment: [String: String]) -> NodeHome {
        if let explicit, !explicit.isEmpty { return NodeHome(path: explicit) }
        if let env = environment["SYNCPEER_HOME"], !env.isEmpty { return NodeHome(path: env) }
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty { return NodeHome(path: xdg + "/syncpeer") }
        let user = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        return NodeHome(path: user + "/.local/share/syncpeer")
    }

    /// The X25519 private key, mode 0600.
    package var keyFile: String { path + "/identity.key" }
    /// The SQLite index.
    package var indexFile: String { path + "/index.db" }
    /// The daemon's control socket (mode 0600).
    package var controlSocket: String { path + "/control.sock" }
    /// Held (flock) by the running daemon, with its PID inside.
    package var lockFile: String { path + "/daemon.lock" }
    /// The versions store: chunks under `.chunks` (`VersionStore`); the folders' trees of
    /// older releases are taken into it at start (`KeptFolderImport`).
    package var versionsDirectory: String { path + "/versions" }

    /// Creates the directory (mode 0700) if it does not exist.
    package func create() throws(EngineError) {
        var isDirectory = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory else { throw .homeUnusable(path: path, reason: "it exists and is not a directory") }
            return
        }
        // Durably: a home whose name a power cut took would come back as a new identity.
        do {
            try DurableNames.createDirectories(path, mode: 0o700)
        } catch {
            throw .homeUnusable(path: path, reason: "cannot create it (\(PlainText.reason(error)))")
        }
    }
}
