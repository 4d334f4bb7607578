internal import Glibc

/// The rules of a `.syncpeerignore` file: which paths of a shared folder stay on this
/// machine. Pure (no I/O) except `load(from:)`.
///
/// Syntax, one rule per line (close to `.gitignore`):
/// - blank lines and lines starting with `#` are skipped; trailing spaces are dropped;
///   `\#`, `\!` and `\ ` (and a backslash before any character) stand for the character;
/// - `!pattern` re-includes what an earlier rule excluded: the **last** matching rule wins;
/// - `*` matches any run of characters except `/`, `?` one character except `/`,
///   `[abc]`, `[a-z]`, `[!a-z]` / `[^a-z]` one character of (not of) the set;
///   an unclosed `[` is a literal `[`;
/// - `**` as a whole path component matches any number (zero included) of directories:
///   `**/build`, `logs/**`, `a/**/b`;
/// - a leading `/` anchors the pattern to the folder root (`/build` is only the top-level
///   one); a pattern with a `/` in the middle is anchored too (`docs/*.md`);
/// - a pattern without `/` matches the name at any depth (`*.o`, `node_modules`);
/// - a trailing `/` matches directories only (`cache/`).
///
/// An ignored directory ignores everything below it (a later `!` rule cannot re-include a
/// file whose directory is excluded, as in git). Matching is case-sensitive, on Unicode
/// scalars, without normalization.
///
/// Built in, whatever the file says: the staging directory `.syncpeer-partial`, the root
/// marker `.syncpeer-folder` (`FolderRoot`: it belongs to this node's copy of the folder,
/// so it is never synced), any name ending in `.syncpeer-tmp`, and the ignore file itself at
/// the root are always ignored. The patterns are this node's alone: the ignore file is never
/// sent to a peer and a peer's is never applied here, so no member can change what this
/// node keeps private (as Syncthing's `.stignore`). A `.syncpeerignore` below the root is
/// an ordinary file: only the root's is read.
package struct IgnorePatterns: Sendable, Equatable {
    /// The name of the ignore file at the folder root.
    package static let fileName = ".syncpeerignore"
    /// Always ignored: the staging directory of partial transfers.
    package static let stagingDirectoryName = ".syncpeer-partial"
    /// Always ignored: names with this suffix (the node's own temporary files).
    package static let temporarySuffix = ".syncpeer-tmp"
    /// Largest ignore file `load(from:)` reads (1 MiB).
    package static let maxFileSize = 1 << 20

    /// One parsed rule.
    struct Rule: Sendable, Equatable {
        var negated: Bool
        var directoryOnly: Bool
        /// Matched against the whole path (true) or against the last component only.
        var anchored: Bool
        var segments: [Segment]
        /// The line as written, for diagnostics.
        var source: String
    }

    enum Segment: Sendable, Equatable {
        case anyDirectories            // "**"
        case literal([UInt8])          // no wildcard: compared byte for byte
        case glob([Token])
    }

    enum Token: Sendable, Equatable {
        case byte(UInt8)
        case anyCharacter              // ?
        case anyRun                    // *
        case set(negated: Bool, ranges: [ClosedRange<UInt32>])
    }

    let rules: [Rule]
    /// The subtrees this node holds (`syncpeer select`): what lies outside is ignored too.
    package var selection = FolderSelection()

    /// No rules: only the built-in exclusions apply.
    package init() { rules = [] }

    /// Parses the text of a `.syncpeerignore` file. Never fails: a malformed construct is
    /// read literally (an unclosed `[`), as `.gitignore` does.
    package init(_ text: String) {
        var parsed: [Rule] = []
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            if let rule = Self.parseLine(Array(rawLine.utf8)) { parsed.append(rule) }
        }
        rules = parsed
    }

    /// Number of rules (comments and blank lines excluded).
    package var count: Int { rules.count }

    /// Reads `.syncpeerignore` at the root of `folder` (never following a symbolic link);
    /// no file means no rules.
    package static func load(from folder: DirectoryHandle) throws(FileError) -> IgnorePatterns {
        let path = folder.path + "/" + fileName
        let fd = openat(folder.fd, fileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return IgnorePatterns() }
            if code == ELOOP {
                throw FileError(kind: .symlinkRefused, operation: "open", path: path, errno: code,
                                message: "the ignore file is a symbolic link; it is not followed")
            }
            throw FileError.system("open", path: path, errno: code)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError.system("read", path: path, errno: errno)
            }
            if n == 0 { break }
            bytes += buffer[0..<n]
            if bytes.count > maxFileSize {
                throw FileError(kind: .invalidArgument, operation: "read", path: path,
                                message: "the ignore file is larger than \(maxFileSize) bytes")
            }
        }
        return IgnorePatterns(String(decoding: bytes, as: UTF8.self))
    }

    // MARK: Matching

    /// Whether `relativePath` ("a/b/c.txt", no leading "/") is ignored: by a built-in
    /// rule, by the last matching rule, or because a directory above it is ignored.
    package func isIgnored(_ relativePath: String, isDirectory: Bool) -> Bool {
        let components = relativePath.utf8.split(separator: UInt8(ascii: "/")).map { Array($0) }
        if components.isEmpty { return false }
        for end in 1...components.count {
            let prefix = components[0..<end]
            if ignoresEntry(prefix, isDirectory: end < components.count || isDirectory) { return true }
        }
        return false
    }

    /// Whether the entry itself is ignored, assuming no directory above it is (the
    /// scanner and the watcher never descend into ignored directories).
    func ignoresEntry(_ components: ArraySlice<[UInt8]>, isDirectory: Bool) -> Bool {
        guard let name = components.last else { return false }
        if Self.isBuiltInIgnored(name: name) || (components.count == 1 && name == Self.fileBytes) { return true }
        if !selection.contains(components, isDirectory: isDirectory) { return true }
        for rule in rules.reversed() where Self.matches(rule, components, isDirectory: isDirectory) {
            return !rule.negated
        }
        return false
    }

    /// Same as `ignoresEntry` for a path given as its parent's components plus a name.
    func ignoresEntry(parent: [[UInt8]], name: [UInt8], isDirectory: Bool) -> Bool {
        if Self.isBuiltInIgnored(name: name) || (parent.isEmpty && name == Self.fileBytes) { return true }
        if rules.isEmpty && selection.isEverything { return false }
        var components = parent
        components.append(name)
        return ignoresEntry(components[...], isDirectory: isDirectory)
    }

    static let fileBytes = Array(fileName.utf8)
    static let stagingBytes = Array(stagingDirectoryName.utf8)
    static let markerBytes = Array(FolderRoot.markerName.utf8)
    static let temporaryBytes = Array(temporarySuffix.utf8)

    static func isBuiltInIgnored(name: [UInt8]) -> Bool {
        if name == stagingBytes || name == markerBytes { return true }
        return name.count >= temporaryBytes.count && name.suffix(temporaryBytes.count).elementsEqual(temporaryBytes)
    }

    static func matches(_ rule: Rule, _ components: ArraySlice<[UInt8]>, isDirectory: Bool) -> Bool {
        if rule.directoryOnly && !isDirectory { return false }
        if !rule.anchored {
            return matchSegment(rule.segments[0], components.last!)
        }
        return matchSegments(rule.segments[...], components)
    }

    static func matchSegments(_ segments: ArraySlice<Segment>, _ components: ArraySlice<[UInt8]>) -> Bool {
        guard let first = segments.first else { return components.isEmpty }
        if case .anyDirectories = first {
            let rest = segments.dropFirst()
            if rest.isEmpty { return !components.isEmpty }   // "foo/**": something inside foo
            var remaining = components
            while true {
                if matchSegments(rest, remaining) { return true }
                if remaining.isEmpty { return false }
                remaining = remaining.dropFirst()
            }
        }
        guard let component = components.first, matchSegment(first, component) else { return false }
        return matchSegments(segments.dropFirst(), components.dropFirst())
    }

    static func matchSegment(_ segment: Segment, _ name: [UInt8]) -> Bool {
        switch segment {
        case .anyDirectories: return true
        case .literal(let bytes): return bytes == name
        case .glob(let tokens): return name.withUnsafeBufferPointer { globMatch(tokens, $0) }
        }
    }

    /// Wildcard matching with single-star backtracking (linear in practice).
    static func globMatch(_ tokens: [Token], _ name: UnsafeBufferPointer<UInt8>) -> Bool {
        var t = 0, i = 0
        var starToken = -1, starIndex = 0
        while i < name.count {
            if t < tokens.count {
                switch tokens[t] {
                case .anyRun:
                    starToken = t
                    starIndex = i
                    t += 1
                    continue
                case .byte(let b):
                    if name[i] == b { t += 1; i += 1; continue }
                case .anyCharacter:
                    t += 1
                    i += scalarLength(name, i)
                    continue
                case .set(let negated, let ranges):
                    let (scalar, length) = decodeScalar(name, i)
                    if ranges.contains(where: { $0.contains(scalar) }) != negated {
                        t += 1
                        i += length
                        continue
                    }
                }
            }
            // Mismatch: let the last star take one more character, or fail.
            guard starToken >= 0 else { return false }
            starIndex += scalarLength(name, starIndex)
            i = starIndex
            t = starToken + 1
        }
        while t < tokens.count, case .anyRun = tokens[t] { t += 1 }
        return t == tokens.count
    }

    static func scalarLength(_ bytes: UnsafeBufferPointer<UInt8>, _ i: Int) -> Int {
        let lead = bytes[i]
        let length = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4
        return min(length, bytes.count - i)
    }

    static func decodeScalar(_ bytes: UnsafeBufferPointer<UInt8>, _ i: Int) -> (UInt32, Int) {
        let length = scalarLength(bytes, i)
        if length == 1 { return (UInt32(bytes[i]), 1) }
        var value = UInt32(bytes[i]) & (0xFF >> (length + 1))
        for k in 1..<length { value = (value << 6) | (UInt32(bytes[i + k]) & 0x3F) }
        return (value, length)
    }

    // MARK: Parsing

    static func parseLine(_ line: [UInt8]) -> Rule? {
        var bytes = line[...]
        if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
        // Trailing spaces are dropped unless escaped.
        while bytes.last == UInt8(ascii: " ") {
            let beforeSpace = bytes.dropLast()
            let backslashes = beforeSpace.reversed().prefix { $0 == UInt8(ascii: "\\") }.count
            if backslashes % 2 == 1 { break }
            bytes = beforeSpace
        }
        guard let first = bytes.first else { return nil }
        if first == UInt8(ascii: "#") { return nil }
        var negated = false
        if first == UInt8(ascii: "!") {
            negated = true
            bytes = bytes.dropFirst()
        }
        var directoryOnly = false
        while bytes.last == UInt8(ascii: "/") {
            directoryOnly = true
            bytes = bytes.dropLast()
        }
        var anchored = false
        if bytes.first == UInt8(ascii: "/") {
            anchored = true
            while bytes.first == UInt8(ascii: "/") { bytes = bytes.dropFirst() }
        }
        let parts = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
        if parts.isEmpty { return nil }
        if parts.count > 1 { anchored = true }
        var segments: [Segment] = []
        for part in parts {
            if part.elementsEqual([UInt8(ascii: "*"), UInt8(ascii: "*")]) {
                if segments.last != .anyDirectories { segments.append(.anyDirectories) }
                continue
            }
            segments.append(compileSegment(Array(part)))
        }
        // A lone "**" matches every path, as an anchored rule.
        if segments == [.anyDirectories] { anchored = true }
        return Rule(negated: negated, directoryOnly: directoryOnly, anchored: anchored,
                    segments: segments, source: String(decoding: line, as: UTF8.self))
    }

    static func compileSegment(_ part: [UInt8]) -> Segment {
        var tokens: [Token] = []
        var i = 0
        var hasWildcard = false
        while i < part.count {
            let c = part[i]
            switch c {
            case UInt8(ascii: "\\"):
                if i + 1 < part.count { tokens.append(.byte(part[i + 1])); i += 2 } else { tokens.append(.byte(c)); i += 1 }
            case UInt8(ascii: "*"):
                hasWildcard = true
                if tokens.last != .anyRun { tokens.append(.anyRun) }
                i += 1
            case UInt8(ascii: "?"):
                hasWildcard = true
                tokens.append(.anyCharacter)
                i += 1
            case UInt8(ascii: "["):
                if let (set, next) = parseSet(part, from: i) {
                    hasWildcard = true
                    tokens.append(set)
                    i = next
                } else {
                    tokens.append(.byte(c))
                    i += 1
                }
            default:
                tokens.append(.byte(c))
                i += 1
            }
        }
        if !hasWildcard {
            return .literal(tokens.map { if case .byte(let b) = $0 { return b } else { return 0 } })
        }
        return .glob(tokens)
    }

    /// `[...]` starting at `start`: the token and the index after `]`, or nil if unclosed.
    static func parseSet(_ part: [UInt8], from start: Int) -> (Token, Int)? {
        var i = start + 1
        var negated = false
        if i < part.count && (part[i] == UInt8(ascii: "!") || part[i] == UInt8(ascii: "^")) {
            negated = true
            i += 1
        }
        var ranges: [ClosedRange<UInt32>] = []
        var first = true
        return part.withUnsafeBufferPointer { buffer -> (Token, Int)? in
            while i < buffer.count {
                if buffer[i] == UInt8(ascii: "]") && !first {
                    return (.set(negated: negated, ranges: ranges), i + 1)
                }
                first = false
                if buffer[i] == UInt8(ascii: "\\") && i + 1 < buffer.count { i += 1 }
                let (low, length) = decodeScalar(buffer, i)
                i += length
                if i + 1 < buffer.count && buffer[i] == UInt8(ascii: "-") && buffer[i + 1] != UInt8(ascii: "]") {
                    i += 1
                    if buffer[i] == UInt8(ascii: "\\") && i + 1 < buffer.count { i += 1 }
                    let (high, highLength) = decodeScalar(buffer, i)
                    i += highLength
                    if low <= high { ranges.append(low...high) }
                } else {
                    ranges.append(low...low)
                }
            }
            return nil
        }
    }
}
