/// A domain name as a list of labels (raw bytes: DNS-SD instance names are UTF-8 and may
/// contain dots and spaces inside a label). Comparison ignores ASCII case (RFC 1035 §2.3.3,
/// RFC 6762 §16), so `==` and hashing use the lowercased labels.
package struct DNSName: Hashable, Sendable, CustomStringConvertible {
    /// The labels, first (leftmost) to last, without the root.
    package let labels: [[UInt8]]

    /// A name from labels as bytes. No limits are checked here; encoding checks them.
    package init(labelBytes: [[UInt8]]) {
        labels = labelBytes
    }

    /// A name from labels as text (each label UTF-8 encoded as it is: dots allowed).
    package init(labels: [String]) {
        self.labels = labels.map { Array($0.utf8) }
    }

    /// A name from dotted text ("_sync._tcp.local"); a trailing dot is ignored.
    /// Use `init(labels:)` when a label itself contains a dot.
    package init(_ dotted: String) {
        labels = dotted.split(separator: ".", omittingEmptySubsequences: true).map { Array($0.utf8) }
    }

    /// The root name (no labels).
    package static let root = DNSName(labelBytes: [])

    /// The wire length: one length byte per label plus the bytes, plus the root byte.
    package var wireLength: Int { labels.reduce(1) { $0 + 1 + $1.count } }

    /// The labels lowercased (ASCII only), the form used for comparison.
    var canonical: [[UInt8]] { labels.map { $0.map(asciiLower) } }

    /// The name with `labels` prepended.
    package func prepending(_ label: String) -> DNSName {
        DNSName(labelBytes: [Array(label.utf8)] + labels)
    }

    /// The first label as text (the user-visible part of a service instance name).
    package var firstLabel: String {
        labels.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// The name without its first label.
    package var parent: DNSName { DNSName(labelBytes: Array(labels.dropFirst())) }

    /// Dotted text; dots and backslashes inside a label are escaped with a backslash.
    package var description: String {
        if labels.isEmpty { return "." }
        return labels.map { label in
            String(decoding: label, as: UTF8.self)
                .replacingBackslashAndDot()
        }.joined(separator: ".")
    }

    package static func == (lhs: DNSName, rhs: DNSName) -> Bool {
        guard lhs.labels.count == rhs.labels.count else { return false }
        for (a, b) in zip(lhs.labels, rhs.labels) {
            guard a.count == b.count else { return false }
            for (x, y) in zip(a, b) where asciiLower(x) != asciiLower(y) { return false }
        }
        return true
    }

    package func hash(into hasher: inout Hasher) {
        for label in labels {
            hasher.combine(label.count)
            for byte in label { hasher.combine(asciiLower(byte)) }
        }
    }
}

@inline(__always)
func asciiLower(_ byte: UInt8) -> UInt8 {
    (byte >= 0x41 && byte <= 0x5A) ? byte + 0x20 : byte
}

extension String {
    fileprivate func replacingBackslashAndDot() -> String {
        var out = ""
        for ch in self {
            if ch == "." || ch == "\\" { out.append("\\") }
            out.append(ch)
        }
        return out
    }
}
