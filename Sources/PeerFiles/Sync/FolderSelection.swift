/// Which subtrees of a shared folder this node holds (selective sync, `syncpeer select`).
/// Pure: no I/O.
///
/// A selection is a list of folder-relative paths; empty means the whole folder. A path is
/// in the selection when it is a selected path or lies below one ("docs" holds
/// "docs/a/b.txt"), or when it is a directory above one (selecting "photos/2024" keeps the
/// directory "photos" itself, which holds it, but not "photos/2023" nor a file
/// "photos/x.jpg"). What is outside is treated as ignored (`IgnorePatterns.selection`):
/// it is not fetched, not scanned, not served, and a record we hold of it is never
/// reported as deleted.
///
/// Matching compares whole components byte for byte (no Unicode normalization, case
/// sensitive), as the ignore patterns and the wire do: "docs" never holds "docs2" or
/// "Docs". Each selected path is validated as a peer's path is (`SafePath`: no "..", no
/// ".", no empty component, no control character); a trailing "/" is dropped. A path below
/// another selected one adds nothing and is dropped.
package struct FolderSelection: Sendable, Equatable {
    /// The most paths a selection holds (a user's list, kept in the index).
    package static let maxPaths = 1_000

    /// The selected paths, in byte order, none below another; empty: everything.
    package let paths: [String]
    /// The selected paths as UTF-8.
    private let selected: Set<[UInt8]>
    /// Every directory strictly above a selected path, as UTF-8 ("a" and "a/b" for "a/b/c").
    private let ancestors: Set<[UInt8]>

    /// The whole folder.
    package init() {
        paths = []
        selected = []
        ancestors = []
    }

    /// Validates and normalizes `paths` (see the type). Throws the first invalid path's
    /// reason, or `tooMany` beyond `maxPaths`.
    package init(_ paths: [String]) throws(FolderSelectionError) {
        guard paths.count <= Self.maxPaths else { throw .tooMany(count: paths.count, limit: Self.maxPaths) }
        var valid: [[UInt8]] = []
        for raw in paths {
            var text = Substring(raw)
            while text.count > 1 && text.hasSuffix("/") { text = text.dropLast() }
            do { valid.append(Array(try SafePath(String(text)).string.utf8)) } catch {
                throw .invalidPath(raw, error)
            }
        }
        // Byte order puts "a" before "a/b" (and "a/b" before "a0"): a path is dropped when the
        // last one kept is a whole-component prefix of it.
        valid.sort { $0.lexicographicallyPrecedes($1) }
        var kept: [[UInt8]] = []
        for path in valid {
            if let last = kept.last, Self.isAtOrBelow(path, last) { continue }
            kept.append(path)
        }
        var above = Set<[UInt8]>()
        for path in kept {
            for (i, byte) in path.enumerated() where byte == UInt8(ascii: "/") { above.insert(Array(path[..<i])) }
        }
        self.paths = kept.map { String(decoding: $0, as: UTF8.self) }
        selected = Set(kept)
        ancestors = above
    }

    /// Whether the selection is the whole folder.
    package var isEverything: Bool { paths.isEmpty }

    /// Whether `relativePath` ("a/b/c.txt") is held by this node: at or below a selected
    /// path, or a directory above one. The root ("") is always in.
    package func contains(_ relativePath: String, isDirectory: Bool) -> Bool {
        let components = relativePath.utf8.split(separator: UInt8(ascii: "/")).map { Array($0) }
        return contains(components[...], isDirectory: isDirectory)
    }

    /// The same for a path given as its components.
    func contains(_ components: ArraySlice<[UInt8]>, isDirectory: Bool) -> Bool {
        if paths.isEmpty || components.isEmpty { return true }
        var joined: [UInt8] = []
        for component in components {
            if !joined.isEmpty { joined.append(UInt8(ascii: "/")) }
            joined += component
            if selected.contains(joined) { return true }
        }
        return isDirectory && ancestors.contains(joined)
    }

    /// Whether every path at or below `relativePath` is in the selection (the whole subtree
    /// is held here), as opposed to only some of it (`overlaps`).
    package func holdsAll(under relativePath: String) -> Bool {
        if paths.isEmpty { return true }
        let bytes = Array(relativePath.utf8)
        return selected.contains { Self.isAtOrBelow(bytes, $0) }
    }

    /// Whether some path at or below `relativePath` is in the selection.
    package func overlaps(_ relativePath: String) -> Bool {
        if paths.isEmpty || relativePath.isEmpty { return true }
        let bytes = Array(relativePath.utf8)
        return holdsAll(under: relativePath) || ancestors.contains(bytes)
    }

    /// Whether `path` equals `base` or lies below it (whole components).
    static func isAtOrBelow(_ path: [UInt8], _ base: [UInt8]) -> Bool {
        if base.isEmpty { return true }
        guard path.count >= base.count, path.starts(with: base) else { return false }
        return path.count == base.count || path[base.count] == UInt8(ascii: "/")
    }
}

/// Why a selection was refused.
package enum FolderSelectionError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidPath(String, SafePathError)
    case tooMany(count: Int, limit: Int)

    package var description: String {
        switch self {
        case let .invalidPath(path, reason): "cannot select \(path.debugDescription): \(reason)"
        case let .tooMany(count, limit): "cannot select \(count) paths: at most \(limit)"
        }
    }
}
