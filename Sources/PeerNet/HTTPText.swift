/// Text rules shared by the HTTP/1.1 and WebSocket code (the dashboard's server, the
/// WebSocket client): plain Swift, so that no module needs Foundation's `CharacterSet` for them.
package enum HTTPText {
    /// `text` without the optional white space (spaces and horizontal tabs, RFC 9110 §5.6.3)
    /// at either end, as a header value is read.
    package static func trimmed(_ text: some StringProtocol) -> String {
        var value = Substring(text)
        while let first = value.first, first == " " || first == "\t" { value = value.dropFirst() }
        while let last = value.last, last == " " || last == "\t" { value = value.dropLast() }
        return String(value)
    }
}
