internal import Glibc

/// Names of conflict copies: when two devices changed a file concurrently, the losing
/// version is kept next to it as
/// `name.sync-conflict-YYYYMMDD-HHMMSS-<device>.ext` (time in UTC) and syncs like any file.
///
/// The extension is what follows the last "." of the file name unless that dot is its
/// first character (a dotfile: `.bashrc` → `.bashrc.sync-conflict-…`) or its last one;
/// without an extension the suffix is appended (`Makefile.sync-conflict-…`).
/// `archive.tar.gz` → `archive.tar.sync-conflict-….gz`. Directories in the path are kept.
/// A name that would exceed 255 bytes has its stem shortened (on a character boundary).
public enum ConflictName {
    public static let marker = ".sync-conflict-"
    /// A GLOB pattern (SQLite's, case-sensitive) every conflict copy's path matches: the
    /// prefilter of an index query, whose results `isConflictName` then checks.
    public static let glob = "*" + marker + "*"

    /// The conflict copy's path for `path` ("dir/report.pdf"), at `unixSeconds` (seconds
    /// since 1970-01-01 UTC, e.g. `Int64(date.timeIntervalSince1970)`), by the device
    /// whose short ID is `device` (e.g. the first 7 characters of its device ID).
    public static func make(for path: String, at unixSeconds: Int64, device: String) -> String {
        let (directory, name) = split(path)
        var stem = Substring(name)
        var ext = Substring("")
        if let dot = name.lastIndex(of: "."), dot != name.startIndex, name.index(after: dot) != name.endIndex {
            stem = name[..<dot]
            ext = name[dot...]
        }
        let suffix = marker + timestamp(unixSeconds) + "-" + device
        while stem.utf8.count + suffix.utf8.count + ext.utf8.count > SafePath.maxComponentBytes && !stem.isEmpty {
            stem = stem.dropLast()
        }
        return directory + stem + suffix + ext
    }

    /// Whether the last component of `path` is a conflict copy's name (made by `make`).
    public static func isConflictName(_ path: String) -> Bool { parse(path) != nil }

    /// The path a conflict copy was made for (its stem and extension put back together),
    /// with its time (`YYYYMMDD-HHMMSS`) and device; nil if it is not a conflict name.
    /// For a name whose stem was shortened, the original's stem is the shortened one.
    public static func parse(_ path: String) -> (original: String, time: String, device: String)? {
        let (directory, name) = split(path)
        let bytes = Array(name.utf8)
        let markerBytes = Array(marker.utf8)
        // Search from the end: a name may contain the marker more than once (a conflict
        // of a conflict copy); the last one is the outermost.
        var start = bytes.count - markerBytes.count
        while start >= 0 {
            if bytes[start..<start + markerBytes.count].elementsEqual(markerBytes),
               let result = parseSuffix(bytes[(start + markerBytes.count)...]) {
                let stem = String(decoding: bytes[..<start], as: UTF8.self)
                let ext = String(decoding: result.ext, as: UTF8.self)
                // A dotfile's suffix comes after the whole name (".bashrc"): no extension then.
                guard !stem.isEmpty else { return nil }
                return (directory + stem + ext, result.time, result.device)
            }
            start -= 1
        }
        return nil
    }

    /// "YYYYMMDD-HHMMSS-DEVICE" optionally followed by ".ext".
    private static func parseSuffix(_ s: ArraySlice<UInt8>) -> (time: String, device: String, ext: ArraySlice<UInt8>)? {
        let b = Array(s)
        guard b.count >= 17 else { return nil }
        func digits(_ r: Range<Int>) -> Bool { b[r].allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        guard digits(0..<8), b[8] == UInt8(ascii: "-"), digits(9..<15), b[15] == UInt8(ascii: "-") else { return nil }
        var end = 16
        while end < b.count, b[end] != UInt8(ascii: ".") {
            let c = b[end]
            guard (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) else { return nil }
            end += 1
        }
        guard end > 16 else { return nil }
        if end < b.count {
            // The extension: one "." then at least one character and no further ".".
            guard end + 1 < b.count, !b[(end + 1)...].contains(UInt8(ascii: ".")) else { return nil }
        }
        return (String(decoding: b[0..<15], as: UTF8.self), String(decoding: b[16..<end], as: UTF8.self), s[(s.startIndex + end)...])
    }

    /// "YYYYMMDD-HHMMSS" in UTC.
    static func timestamp(_ unixSeconds: Int64) -> String {
        var t = time_t(unixSeconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)" + two(parts.tm_mon + 1) + two(parts.tm_mday)
            + "-" + two(parts.tm_hour) + two(parts.tm_min) + two(parts.tm_sec)
    }

    private static func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return ("", path) }
        return (String(path[...slash]), String(path[path.index(after: slash)...]))
    }
}
