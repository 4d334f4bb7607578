/// The user's download folder as the XDG user directories name it: `XDG_DOWNLOAD_DIR` in
/// `$XDG_CONFIG_HOME/user-dirs.dirs` (default `~/.config/user-dirs.dirs`), a shell-style
/// line such as `XDG_DOWNLOAD_DIR="$HOME/Téléchargements"`; else `~/Downloads`.
package enum UserDirs {
    /// The download folder from the file's contents (nil: not set there, or not usable).
    package static func downloadDirectory(userDirs contents: String, home: String) -> String? {
        for raw in contents.split(whereSeparator: \.isNewline) {
            let line = raw.drop { $0 == " " || $0 == "\t" }
            guard line.hasPrefix("XDG_DOWNLOAD_DIR=") else { continue }
            var value = Substring(line.dropFirst("XDG_DOWNLOAD_DIR=".count))
            if value.hasPrefix("\""), let end = value.dropFirst().firstIndex(of: "\"") {
                value = value[value.index(after: value.startIndex)..<end]
            }
            var path = String(value)
            if path.hasPrefix("$HOME") {
                path = home + path.dropFirst("$HOME".count)
            } else if path.hasPrefix("${HOME}") {
                path = home + path.dropFirst("${HOME}".count)
            }
            // Only an absolute path other than the home itself (xdg-user-dirs' "disabled").
            guard path.hasPrefix("/"), path.trimmingSlashes != home.trimmingSlashes else { return nil }
            return path
        }
        return nil
    }

    /// The folder for an environment: XDG_DOWNLOAD_DIR, else HOME/Downloads.
    package static func downloadDirectory(environment: [String: String], read: (String) -> String?) -> String {
        let home = environment["HOME"] ?? "/tmp"
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        if let contents = read(config + "/user-dirs.dirs"),
           let found = downloadDirectory(userDirs: contents, home: home) {
            return found
        }
        return home + "/Downloads"
    }
}

extension String {
    fileprivate var trimmingSlashes: Substring {
        var text = Substring(self)
        while text.count > 1 && text.hasSuffix("/") { text = text.dropLast() }
        return text
    }
}
