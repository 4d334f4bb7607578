internal import FoundationEssentials
internal import Glibc
internal import PeerFiles

/// The home's `running` file: written with the machine's boot id when a daemon starts and
/// removed when it stops cleanly. Found at start with another boot's id, it says the last
/// daemon went down with the machine (a power cut, a hard reset): then whatever it had not
/// made durable, and whatever the user's programs had not, may be gone from the disk, and a
/// file the index records but the disk lacks is not taken as deleted by the user
/// (`SharedFolder.forgetVanished`). A crash of the daemon alone (same boot) keeps the kernel's
/// page cache: what is missing then was deleted, and is deleted at peers as usual.
enum RunningMarker {
    static func path(_ home: NodeHome) -> String { home.path + "/running" }

    /// This boot's id (`/proc/sys/kernel/random/boot_id`; "" where there is none).
    static func currentBootID() -> String {
        ((try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? "")
            .trimmingWhitespaceAndNewlines()
    }

    /// Whether the last daemon of `home` went down with the machine (its marker is left, from
    /// another boot than `bootID`); then marks this run (durably).
    static func begin(home: NodeHome, bootID: String) -> Bool {
        let file = path(home)
        let left = try? String(contentsOfFile: file, encoding: .utf8)
        let wentDown = left.map { $0.trimmingWhitespaceAndNewlines() != bootID } ?? false
        let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 {
            let bytes = Array((bootID + "\n").utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            fsync(fd)
            close(fd)
            DurableNames.syncDirectory(home.path)
        }
        return wentDown
    }

    /// The daemon stopped cleanly: the marker goes (durably).
    static func end(home: NodeHome) {
        if unlink(path(home)) == 0 { DurableNames.syncDirectory(home.path) }
    }
}
