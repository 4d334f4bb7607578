internal import Glibc
internal import PeerCrypto

/// Short hex tags of names (conflict copies, temporary names): lowercase hex of the first
/// bytes of BLAKE2b-256 of the name. Names on disk outlive versions, so this stays BLAKE2b
/// although the content hash changed (SHA-256 in protocol version 3, BLAKE3 since 4).
package enum NameTag {
    /// The first `digits` (≤ 64) hex digits of BLAKE2b-256(`bytes`).
    package static func hex(of bytes: some Collection<UInt8>, digits: Int) -> String {
        String(PeerCrypto.hex(BLAKE2b.hash(Array(bytes), length: 32).prefix((digits + 1) / 2)).prefix(digits))
    }
}

/// Names of conflict copies: when two devices changed a file concurrently, the losing
/// version is kept next to it as
/// `name.sync-conflict-YYYYMMDD-HHMMSS-<device>-<tag>.ext` (time in UTC) and syncs like any
/// file. The tag (8 hex digits of a hash of the losing version's version vector) tells apart
/// two losing versions of one device in the same second (two edits 0.3 s apart once got one
/// name, and the second copy could never be made); every peer that keeps the same losing
/// version names it alike. Names without a tag (made before it) still parse.
///
/// The extension is what follows the last "." of the file name unless that dot is its
/// first character (a dotfile: `.bashrc` → `.bashrc.sync-conflict-…`) or its last one;
/// without an extension the suffix is appended (`Makefile.sync-conflict-…`).
/// `archive.tar.gz` → `archive.tar.sync-conflict-….gz`. Directories in the path are kept.
/// A name that would exceed 255 bytes (NAME_MAX) keeps its suffix and, where it fits, its
/// extension; its stem is cut on a UTF-8 character boundary and ends in `~` and 8 hex
/// digits of a hash of the whole original name, so two long names that differ only at
/// their end never share a conflict copy. `isCopy(_:of:)` tells whose copy such a name is.
package enum ConflictName {
    package static let marker = ".sync-conflict-"
    /// A GLOB pattern (SQLite's, case-sensitive) every conflict copy's path matches: the
    /// prefilter of an index query, whose results `isConflictName` then checks.
    package static let glob = "*" + marker + "*"
    /// Characters a shortened stem ends with: "~" and 8 hex digits.
    static let shortenedTagBytes = 9
    /// Hex digits of a version's tag.
    static let tagDigits = 8
    /// How many other names `alternative` offers when a copy's name is taken.
    package static let maxAlternatives = 8

    /// The tag of a losing version: the first 8 hex digits of BLAKE2b-256 of `bytes` (the
    /// version vector's JSON), the same on every peer.
    package static func tag(of bytes: some Collection<UInt8>) -> String {
        NameTag.hex(of: bytes, digits: tagDigits)
    }

    /// When the name `copy` (a conflict copy of `original`) is taken on disk or in the index:
    /// its `attempt`-th other name (1 ≤ attempt ≤ `maxAlternatives`), the same time and device
    /// with the tag hashed again with the attempt, so it stays a function of the losing
    /// version and the attempt. Nil when `copy` is no conflict name or attempts are spent.
    package static func alternative(_ copy: String, of original: String, attempt: Int) -> String? {
        guard (1...maxAlternatives).contains(attempt), let found = parts(of: split(copy).name) else { return nil }
        let seed = Array((found.tag ?? "").utf8) + Array("#\(attempt)".utf8)
        return make(for: original, stamp: found.time, device: found.device, tag: tag(of: seed))
    }

    /// The conflict copy's path for `path` ("dir/report.pdf"), at `unixSeconds` (seconds
    /// since 1970-01-01 UTC, e.g. `Int64(date.timeIntervalSince1970)`), by the device
    /// whose short ID is `device` (e.g. the first 7 characters of its device ID).
    package static func make(for path: String, at unixSeconds: Int64, device: String, tag: String? = nil) -> String {
        make(for: path, stamp: timestamp(unixSeconds), device: device, tag: tag)
    }

    /// The same with the time already written as `YYYYMMDD-HHMMSS` (UTC). `device` may come
    /// from a peer: only its letters and digits are used (at most 7; "0" if none), so the
    /// name never gains a "/" or a "." and always parses back. `tag` likewise keeps only its
    /// letters and digits (at most 8); nil or empty: no tag.
    package static func make(for path: String, stamp: String, device: String, tag: String? = nil) -> String {
        let (directory, name) = split(path)
        let nameBytes = Array(name.utf8)
        var stem = nameBytes[...]
        var ext = nameBytes[nameBytes.endIndex...]
        if let dot = nameBytes.lastIndex(of: UInt8(ascii: ".")), dot != 0, dot != nameBytes.count - 1 {
            stem = nameBytes[..<dot]
            ext = nameBytes[dot...]
        }
        let safeDevice = device.utf8.filter(isAlphanumeric).prefix(7)
        let safeTag = (tag ?? "").utf8.filter(isAlphanumeric).prefix(tagDigits)
        let suffix = Array((marker + stamp + "-").utf8) + (safeDevice.isEmpty ? [UInt8(ascii: "0")] : Array(safeDevice))
            + (safeTag.isEmpty ? [] : [UInt8(ascii: "-")] + Array(safeTag))
        let limit = SafePath.maxComponentBytes
        if stem.count + suffix.count + ext.count <= limit {
            return directory + String(decoding: stem + suffix + ext, as: UTF8.self)
        }
        // Too long: the extension stays if at least one byte of the stem fits with it.
        if suffix.count + ext.count + shortenedTagBytes + 1 > limit {
            stem = nameBytes[...]
            ext = nameBytes[nameBytes.endIndex...]
        }
        let kept = utf8Prefix(stem, maxBytes: limit - suffix.count - ext.count - shortenedTagBytes)
        let tag = Array(("~" + NameTag.hex(of: nameBytes, digits: 8)).utf8)
        return directory + String(decoding: kept + tag + suffix + ext, as: UTF8.self)
    }

    /// Whether `copy` is a conflict copy of `original` (both relative paths): the copy's
    /// name is what `make` gives for `original` at the copy's time, device and tag. Unlike
    /// comparing with `parse(copy)?.original`, this also holds for shortened names.
    package static func isCopy(_ copy: String, of original: String) -> Bool {
        // Compared as bytes: two names equal under Unicode normalization are two files.
        guard let parsed = parse(copy) else { return false }
        if parsed.original.utf8.elementsEqual(original.utf8) { return true }
        let tag = parts(of: split(copy).name)?.tag
        return make(for: original, stamp: parsed.time, device: parsed.device, tag: tag).utf8.elementsEqual(copy.utf8)
    }

    /// For a copy whose name was shortened: the path prefix every possible original starts
    /// with (directory and the kept part of the stem), else nil. Candidates are then
    /// confirmed with `isCopy`.
    package static func shortenedOriginalPrefix(of copy: String) -> String? {
        let (directory, name) = split(copy)
        guard let parts = parts(of: name) else { return nil }
        let stem = parts.stem
        guard stem.count > shortenedTagBytes, stem[stem.endIndex - shortenedTagBytes] == UInt8(ascii: "~"),
              stem.suffix(8).allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else { return nil }
        return directory + String(decoding: stem.dropLast(shortenedTagBytes), as: UTF8.self)
    }

    /// The longest prefix of `bytes` of at most `maxBytes` bytes that ends on a UTF-8
    /// character boundary (never in the middle of a multibyte sequence).
    package static func utf8Prefix(_ bytes: ArraySlice<UInt8>, maxBytes: Int) -> ArraySlice<UInt8> {
        guard bytes.count > maxBytes else { return bytes }
        var end = bytes.startIndex + max(0, maxBytes)
        // A continuation byte (10xxxxxx) at `end` means the cut would split a character.
        while end > bytes.startIndex, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return bytes[bytes.startIndex..<end]
    }

    /// ASCII letter or digit.
    private static func isAlphanumeric(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
    }

    /// Whether the last component of `path` is a conflict copy's name (made by `make`).
    package static func isConflictName(_ path: String) -> Bool { parse(path) != nil }

    /// The path a conflict copy was made for (its stem and extension put back together),
    /// with its time (`YYYYMMDD-HHMMSS`) and device; nil if it is not a conflict name.
    /// For a name whose stem was shortened, the original's stem is the shortened one.
    package static func parse(_ path: String) -> (original: String, time: String, device: String)? {
        let (directory, name) = split(path)
        guard let parts = parts(of: name) else { return nil }
        return (directory + String(decoding: parts.stem + parts.ext, as: UTF8.self), parts.time, parts.device)
    }

    /// A conflict name's stem (before the outermost marker), time, device, tag and extension.
    private static func parts(of name: String) -> (stem: ArraySlice<UInt8>, time: String, device: String, tag: String?, ext: ArraySlice<UInt8>)? {
        let bytes = Array(name.utf8)
        let markerBytes = Array(marker.utf8)
        // Search from the end: a name may contain the marker more than once (a conflict
        // of a conflict copy); the last one is the outermost.
        var start = bytes.count - markerBytes.count
        while start >= 0 {
            if bytes[start..<start + markerBytes.count].elementsEqual(markerBytes),
               let result = parseSuffix(bytes[(start + markerBytes.count)...]) {
                // A dotfile's suffix comes after the whole name (".bashrc"): no extension then.
                guard start > 0 else { return nil }
                return (bytes[..<start], result.time, result.device, result.tag, result.ext)
            }
            start -= 1
        }
        return nil
    }

    /// "YYYYMMDD-HHMMSS-DEVICE", optionally "-TAG", optionally followed by ".ext".
    private static func parseSuffix(_ s: ArraySlice<UInt8>) -> (time: String, device: String, tag: String?, ext: ArraySlice<UInt8>)? {
        let b = Array(s)
        guard b.count >= 17 else { return nil }
        func digits(_ r: Range<Int>) -> Bool { b[r].allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        guard digits(0..<8), b[8] == UInt8(ascii: "-"), digits(9..<15), b[15] == UInt8(ascii: "-") else { return nil }
        var end = 16
        while end < b.count, b[end] != UInt8(ascii: "."), b[end] != UInt8(ascii: "-") {
            guard isAlphanumeric(b[end]) else { return nil }
            end += 1
        }
        guard end > 16 else { return nil }
        let deviceEnd = end
        var tag: String?
        if end < b.count, b[end] == UInt8(ascii: "-") {
            end += 1
            while end < b.count, b[end] != UInt8(ascii: ".") {
                guard isAlphanumeric(b[end]) else { return nil }
                end += 1
            }
            guard end > deviceEnd + 1 else { return nil }
            tag = String(decoding: b[(deviceEnd + 1)..<end], as: UTF8.self)
        }
        if end < b.count {
            // The extension: one "." then at least one character and no further ".".
            guard end + 1 < b.count, !b[(end + 1)...].contains(UInt8(ascii: ".")) else { return nil }
        }
        return (String(decoding: b[0..<15], as: UTF8.self), String(decoding: b[16..<deviceEnd], as: UTF8.self), tag,
                s[(s.startIndex + end)...])
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

    /// The seconds since 1970 (UTC) of a "YYYYMMDD-HHMMSS" stamp; nil if it is not one.
    package static func unixSeconds(ofStamp stamp: String) -> Int64? {
        let digits = stamp.utf8.filter { $0 != UInt8(ascii: "-") }.map { Int32($0) - 48 }
        guard stamp.utf8.count == 15, digits.count == 14, digits.allSatisfy({ (0...9).contains($0) }) else { return nil }
        func number(_ range: Range<Int>) -> Int32 { digits[range].reduce(0) { $0 * 10 + $1 } }
        var parts = tm()
        parts.tm_year = number(0..<4) - 1900
        parts.tm_mon = number(4..<6) - 1
        parts.tm_mday = number(6..<8)
        parts.tm_hour = number(8..<10)
        parts.tm_min = number(10..<12)
        parts.tm_sec = number(12..<14)
        return Int64(timegm(&parts))
    }

    private static func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return ("", path) }
        return (String(path[...slash]), String(path[path.index(after: slash)...]))
    }
}
