/// `NSString`'s path helpers on plain strings (issue 42.6: no Foundation in the binary),
/// with its results for the paths syncpeer builds (PlainTextTests compares them).
package enum PathName {
    /// The last component: "/a/b/" → "b", "/" → "/", "" → "".
    package static func lastComponent(_ path: String) -> String {
        let trimmed = withoutTrailingSlashes(path)
        if trimmed.isEmpty { return path.isEmpty ? "" : "/" }
        return String(trimmed[(trimmed.lastIndex(of: "/").map(trimmed.index(after:)) ?? trimmed.startIndex)...])
    }

    /// The path without its last component: "/a/b" → "/a", "/a" → "/", "a" → "", "/" → "/".
    package static func deletingLastComponent(_ path: String) -> String {
        let trimmed = withoutTrailingSlashes(path)
        if trimmed.isEmpty { return path.isEmpty ? "" : "/" }
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        let parent = withoutTrailingSlashes(trimmed[..<slash])
        return parent.isEmpty ? "/" : String(parent)
    }

    /// `component` under `path`: "a" + "b" → "a/b", "a/" + "b" → "a/b", "" + "b" → "b".
    package static func appending(_ path: String, _ component: String) -> String {
        path.isEmpty ? component : path.hasSuffix("/") ? path + component : path + "/" + component
    }

    /// The last component's extension: "a.txt" → "txt", ".bashrc" → "", "a." → "".
    package static func pathExtension(_ path: String) -> String {
        let path = fixingSlashes(path)
        return extensionDot(path).map { String(path[path.index(after: $0)...]) } ?? ""
    }

    /// The path without its extension: "a.txt" → "a", "a." → "a", ".bashrc" → ".bashrc"
    /// (and, as NSString has it, without repeated and trailing slashes: "a//b/" → "a/b").
    package static func deletingPathExtension(_ path: String) -> String {
        let path = fixingSlashes(path)
        return extensionDot(path).map { String(path[..<$0]) } ?? path
    }

    /// Repeated slashes as one, no trailing slash (but "/" itself).
    private static func fixingSlashes(_ path: String) -> String {
        var fixed = ""
        for character in path where !(character == "/" && fixed.hasSuffix("/")) { fixed.append(character) }
        return fixed.count > 1 && fixed.hasSuffix("/") ? String(fixed.dropLast()) : fixed
    }

    private static func extensionDot(_ path: String) -> String.Index? {
        let start = path.lastIndex(of: "/").map(path.index(after:)) ?? path.startIndex
        guard let dot = path[start...].lastIndex(of: "."), dot > start else { return nil }
        return dot
    }

    private static func withoutTrailingSlashes(_ path: some StringProtocol) -> Substring {
        var text = Substring(path)
        while text.hasSuffix("/") { text = text.dropLast() }
        return text
    }
}
