/// A name (a path, a label) made safe to show to a person on a terminal or a page.
///
/// Names come from peers and from other programs: U+202E (right-to-left override) turns
/// "gpj.exe" into what reads as "exe.jpg", zero-width characters hide a difference, and
/// control characters move a terminal's cursor. Every scalar that is not shown as a mark
/// of its own is written as its code instead: controls (Cc), format characters (Cf: the
/// bidirectional embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069, the
/// marks U+200E, U+200F and U+061C, zero-width characters) and the line and paragraph
/// separators. `"a\u{202E}txt.exe"` is shown as `a\u{202E}txt.exe`. Only what people read
/// is escaped: JSON keeps the real name.
package enum NameDisplay {
    /// `name` with every invisible or reordering scalar written as `\u{XXXX}`.
    package static func escaped(_ name: String) -> String {
        guard name.unicodeScalars.contains(where: isHidden) else { return name }
        var out = ""
        out.unicodeScalars.reserveCapacity(name.unicodeScalars.count + 16)
        for scalar in name.unicodeScalars {
            if isHidden(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u{" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Whether `scalar` is escaped by `escaped`.
    package static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}
