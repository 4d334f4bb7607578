internal import Glibc

/// A path as the file system and the index tell paths apart: by their UTF-8 bytes.
///
/// Swift's `String` compares and hashes by Unicode canonical equivalence, so "café" written
/// with U+00E9 and "cafe" + U+0301 are one `String` key although Linux keeps them as two
/// files and SQLite as two rows. Every set or dictionary of folder paths uses this key
/// instead: with `String` keys one of two such names was silently dropped (never pulled,
/// never indexed) while the folder looked in sync.
package struct PathKey: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let string: String

    package init(_ string: String) { self.string = string }
    package init(stringLiteral value: String) { self.string = value }

    package var description: String { string }

    package static func == (a: PathKey, b: PathKey) -> Bool {
        // By memcmp: every dictionary lookup of a path ends here (B: 5 % of the sender's
        // CPU went to comparing UTF-8 views byte by byte).
        var x = a.string, y = b.string
        return x.withUTF8 { p in
            y.withUTF8 { q in p.count == q.count && (p.count == 0 || memcmp(p.baseAddress!, q.baseAddress!, p.count) == 0) }
        }
    }

    package func hash(into hasher: inout Hasher) {
        var copy = string
        copy.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Byte order, the order of the index and of the scanner's walk.
    package static func < (a: PathKey, b: PathKey) -> Bool { utf8Less(a.string, b.string) }
}

extension Sequence where Element == String {
    /// The paths as a set that keeps names differing only by Unicode normalization apart.
    package var pathKeys: Set<PathKey> { Set(map(PathKey.init(_:))) }
}
