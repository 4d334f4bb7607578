internal import Glibc

// The watcher's numbers and messages: durations, and the kernel's inotify limits.
extension FolderWatcher {
    static func nanoseconds(_ d: Duration) -> Int64 {
        let (seconds, attoseconds) = d.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    static func readLimit(_ name: String) -> String? {
        let fd = open("/proc/sys/fs/inotify/" + name, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self).trimmingSpaces
    }

    /// The message of `.watchLimitReached`: the current limit and the exact fix.
    static func watchLimitMessage(root: String, watched: Int) -> String {
        let current = readLimit("max_user_watches")
        let suggested = max((current.flatMap { Int($0) } ?? 8_192) * 2, 524_288)
        return "the inotify watch limit (fs.inotify.max_user_watches = \(current ?? "unknown")) was reached after watching "
            + "\(watched) directories of \(root); changes elsewhere are only found by periodic full scans. "
            + "To raise the limit: sudo sysctl fs.inotify.max_user_watches=\(suggested) "
            + "(and to keep it after a reboot: echo fs.inotify.max_user_watches=\(suggested) | sudo tee /etc/sysctl.d/90-syncpeer.conf)"
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\n" || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\n" || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}
