internal import PeerNet

/// One HTTP/1.1 request as the dashboard server reads it (RFC 9112): only what a browser
/// sends to a local page — GET and POST with an origin-form target, headers, and a body of
/// at most `HTTPLimits.body` bytes given by Content-Length (no chunked bodies).
package struct HTTPRequest: Sendable, Equatable {
    package var method: String
    /// The path of the target, as sent (not decoded: routes are fixed names).
    package var path: String
    /// The query's parameters, percent-decoded; a name given twice keeps the first value.
    package var query: [String: String]
    /// "HTTP/1.1" or "HTTP/1.0".
    package var version: String
    /// Header fields in order, names as sent.
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]

    /// The first value of the header `name` (case-insensitive).
    package func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    package static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.query == b.query && a.version == b.version
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
            && a.body == b.body
    }
}

/// What a request may hold; beyond, the parser refuses it with the status that says so.
package struct HTTPLimits: Sendable {
    /// Bytes of the request line (414 beyond).
    package var requestLine = 8_192
    /// Bytes of the whole head: request line and header fields (431 beyond).
    package var head = 16_384
    /// Header fields (431 beyond).
    package var headerCount = 64
    /// Bytes of the body (413 beyond).
    package var body = 65_536

    package init() {}
}

/// The outcome of parsing the bytes read so far from one connection.
package enum HTTPParseResult: Sendable, Equatable {
    /// Not a whole head yet: read more (the limits are not exceeded yet).
    case incomplete
    /// A valid head whose body has not all arrived: the request is `total` bytes in all.
    case bodyPending(total: Int)
    /// A request, and how many bytes of the buffer it took.
    case request(HTTPRequest, consumed: Int)
    /// Not a request this server takes: answer `status` with `reason` and close.
    case invalid(status: Int, reason: String)
}

/// Parses HTTP/1.1 requests from bytes off the wire, every byte of which is hostile: pure,
/// no I/O, bounded by `HTTPLimits` whatever arrives (fuzzed in SyncpeerWebTests).
package enum HTTPRequestParser {
    package static func parse(_ buffer: [UInt8], limits: HTTPLimits = HTTPLimits()) -> HTTPParseResult {
        guard let headEnd = endOfHead(buffer, within: limits.head) else {
            if firstLineEnd(buffer, within: limits.requestLine + 2) == nil && buffer.count > limits.requestLine + 1 {
                return .invalid(status: 414, reason: "the request line is longer than \(limits.requestLine) bytes")
            }
            return buffer.count >= limits.head ? .invalid(status: 431, reason: "the request head is longer than \(limits.head) bytes")
                : .incomplete
        }
        let lines = split(buffer[0..<headEnd])
        guard let requestLine = lines.first, requestLine.count <= limits.requestLine else {
            return .invalid(status: 414, reason: "the request line is longer than \(limits.requestLine) bytes")
        }
        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else {
            return .invalid(status: 400, reason: "a request line is METHOD SP TARGET SP VERSION")
        }
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .invalid(status: 505, reason: "only HTTP/1.1 and HTTP/1.0 are served")
        }
        let target = parts[1]
        guard target.first == UInt8(ascii: "/"), target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .invalid(status: 400, reason: "the target must be a path starting with '/', in visible ASCII")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard headers.count < limits.headerCount else {
                return .invalid(status: 431, reason: "more than \(limits.headerCount) header fields")
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[line.startIndex..<colon].allSatisfy(isTokenByte) else {
                // Also refuses obsolete line folding (a line starting with a space).
                return .invalid(status: 400, reason: "a header field is NAME: VALUE")
            }
            let value = line[(colon + 1)...]
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                return .invalid(status: 400, reason: "a header value holds a control character")
            }
            headers.append((String(decoding: line[line.startIndex..<colon], as: UTF8.self),
                            HTTPText.trimmed(String(decoding: value, as: UTF8.self))))
        }
        var request = HTTPRequest(method: String(decoding: parts[0], as: UTF8.self), path: "", query: [:],
                                  version: version, headers: headers, body: [])
        if version == "HTTP/1.1" && headers.filter({ $0.name.lowercased() == "host" }).count != 1 {
            return .invalid(status: 400, reason: "an HTTP/1.1 request has exactly one Host header")
        }
        if request.header("transfer-encoding") != nil {
            return .invalid(status: 501, reason: "request bodies are taken with Content-Length only")
        }
        let lengths = Set(headers.filter { $0.name.lowercased() == "content-length" }.map(\.value))
        guard lengths.count <= 1 else { return .invalid(status: 400, reason: "conflicting Content-Length headers") }
        var length = 0
        if let text = lengths.first {
            guard !text.isEmpty, text.count <= 10, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text) else {
                return .invalid(status: 400, reason: "Content-Length is not a number")
            }
            guard value <= limits.body else { return .invalid(status: 413, reason: "the body is larger than \(limits.body) bytes") }
            length = value
        }
        let bodyStart = headEnd + 4
        guard buffer.count - bodyStart >= length else { return .bodyPending(total: bodyStart + length) }
        request.body = Array(buffer[bodyStart..<(bodyStart + length)])
        let targetText = String(decoding: target, as: UTF8.self)
        if let mark = targetText.firstIndex(of: "?") {
            request.path = String(targetText[..<mark])
            guard let query = parseQuery(String(targetText[targetText.index(after: mark)...])) else {
                return .invalid(status: 400, reason: "the query is not valid percent-encoding")
            }
            request.query = query
        } else {
            request.path = targetText
        }
        return .request(request, consumed: bodyStart + length)
    }

    /// The offset of "\r\n\r\n", if it starts within the first `limit` bytes (looked for
    /// from `start` on: a reader passes where its previous look ended, less 3 bytes).
    static func endOfHead(_ buffer: [UInt8], from start: Int = 0, within limit: Int) -> Int? {
        guard buffer.count >= 4 else { return nil }
        let last = min(buffer.count - 4, limit)
        var index = max(0, start)
        while index <= last {
            if buffer[index] == 0x0D && buffer[index + 1] == 0x0A && buffer[index + 2] == 0x0D && buffer[index + 3] == 0x0A {
                return index
            }
            index += 1
        }
        return nil
    }

    private static func firstLineEnd(_ buffer: [UInt8], within limit: Int) -> Int? {
        buffer.prefix(limit).firstIndex(of: 0x0A)
    }

    /// The head's lines, split at CRLF (a bare LF or CR inside a line stays in it and is
    /// refused as a control character or a malformed line).
    private static func split(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            if head[index] == 0x0D, index + 1 < head.endIndex, head[index + 1] == 0x0A {
                lines.append(head[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(head[start..<head.endIndex])
        return lines
    }

    /// RFC 9110 token characters (method and header names).
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// `a=1&b=two%20words` → ["a": "1", "b": "two words"]; nil on bad percent-encoding.
    static func parseQuery(_ text: String) -> [String: String]? {
        var query: [String: String] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(parts[0]), let value = percentDecoded(parts.count > 1 ? parts[1] : "") else { return nil }
            if query[name] == nil { query[name] = value }
        }
        return query
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
