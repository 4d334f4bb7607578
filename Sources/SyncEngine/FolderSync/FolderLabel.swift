/// A folder label or folder ID from a peer, made into one safe name.
///
/// A label is hostile input: it becomes a directory name under the receive folder and is
/// shown in `status`, events and on the terminal. The wire already refuses control
/// characters and more than 255 bytes (PeerWire's `TextRule.folderLabel`); this turns
/// whatever is left into a single harmless path component:
///
/// - `/`, `\`, control, format (bidirectional overrides, zero-width characters), line and
///   paragraph separators and surrogate scalars become `_`;
/// - leading dots and white space go (never hidden, never `.` or `..`), trailing white
///   space goes;
/// - at most `maxBytes` bytes of UTF-8, cut on a character boundary (room is left for
///   ` (1)`, ` (2)`… when the name is taken);
/// - an empty result becomes the fallback (the folder ID, made safe the same way), then
///   `shared folder`.
///
/// `"Holiday photos/../../.ssh"` → `"Holiday photos_.._.._.ssh"`, `"../../x"` → `"_.._x"`,
/// `".."` → the fallback.
enum FolderLabel {
    static let maxBytes = 128
    static let lastResort = "shared folder"

    /// The safe name of `label`, or of `fallback` when nothing of the label is left.
    static func safeName(_ label: String, fallback: String) -> String {
        if let name = clean(label) { return name }
        if let name = clean(fallback) { return name }
        return lastResort
    }

    /// Whether `text` is already a safe name (unchanged by `safeName`).
    static func isSafe(_ text: String) -> Bool {
        clean(text) == text
    }

    private static func clean(_ text: String) -> String? {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            scalars.append(isUnsafe(scalar) ? "_" : scalar)
        }
        // By scalar, not by character: ".\u{301}" is one character that starts with a dot.
        while let first = scalars.first, first == "." || first.properties.isWhitespace { scalars.removeFirst() }
        var cut = ""
        for character in String(scalars) {
            guard cut.utf8.count + character.utf8.count <= maxBytes else { break }
            cut.append(character)
        }
        var trimmed = cut.unicodeScalars
        while let last = trimmed.last, last.properties.isWhitespace { trimmed.removeLast() }
        return trimmed.isEmpty ? nil : String(trimmed)
    }

    private static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        if scalar == "/" || scalar == "\\" { return true }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate: return true
        default: return false
        }
    }
}
