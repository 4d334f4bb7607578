internal import FoundationEssentials
internal import Glibc

/// The few text helpers that Foundation (not FoundationEssentials) used to give the modules
/// linked into `syncpeer`, in one place, so that none of them links ICU (issue 42.6). Each
/// behaves as the Foundation call it replaces (PlainTextTests compares them).
package enum PlainText {
    /// `String(format:)` for C formats of numbers (`%.1f`, `%d`, `%02d`, `%5s`…), by the C
    /// library's `vsnprintf` as Foundation does; no `%@`.
    package static func format(_ format: String, _ arguments: any CVarArg...) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let needed = Int(withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) })
        if needed >= buffer.count {
            buffer = [CChar](repeating: 0, count: needed + 1)
            _ = withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) }
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Foundation's `CharacterSet.whitespaces`.
    static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\t" || scalar == "\u{200B}" || scalar.properties.generalCategory == .spaceSeparator
    }

    /// What an error says to a user (Foundation's `localizedDescription` is not in
    /// FoundationEssentials): a file system call's failure as the system's message for it
    /// ("No such file or directory"), anything else as it describes itself.
    package static func reason(_ error: any Error) -> String {
        if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
        if let cocoa = error as? CocoaError, let posix = cocoa.userInfo["NSUnderlyingError"] as? POSIXError {
            return String(cString: strerror(posix.code.rawValue))
        }
        return "\(error)"
    }
}

extension StringProtocol {
    /// Without the white space at either end: `trimmingCharacters(in: .whitespaces)` (Unicode's
    /// space separators, the tab and, as Foundation has it, the zero-width space; line breaks stay).
    package func trimmingWhitespace() -> String {
        trimming(PlainText.isWhitespace)
    }

    /// Without white space and line breaks at either end: `trimmingCharacters(in:
    /// .whitespacesAndNewlines)`.
    package func trimmingWhitespaceAndNewlines() -> String {
        trimming {
            PlainText.isWhitespace($0) || ("\n"..."\r").contains($0) || $0 == "\u{85}"
                || [.lineSeparator, .paragraphSeparator].contains($0.properties.generalCategory)
        }
    }

    /// Without the scalars that `drop` holds at either end.
    package func trimming(_ drop: (Unicode.Scalar) -> Bool) -> String {
        var scalars = Substring(self).unicodeScalars[...]
        while let first = scalars.first, drop(first) { scalars = scalars.dropFirst() }
        while let last = scalars.last, drop(last) { scalars = scalars.dropLast() }
        return String(String.UnicodeScalarView(scalars))
    }
}
