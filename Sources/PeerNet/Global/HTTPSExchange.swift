/// One HTTP/1.1 request and its response over a stream (a `TLSStream` to a global discovery
/// server), the connection closed after it. Every size the server controls is bounded: the
/// status line and headers together (`maxHead`), the body (`maxBody` unless the caller sets
/// another bound; whether sent with a length, chunked, or until the connection closes), and
/// the whole exchange by a deadline.
package enum HTTPSExchange {
    package static let maxHead = 8_192
    package static let maxBody = 65_536

    package struct Response: Sendable {
        package let status: Int
        /// Header names in lower case; a repeated header keeps its first value.
        package let headers: [String: String]
        package let body: [UInt8]
    }

    package static func perform(_ method: String, path: String, host: String, body: [UInt8]? = nil,
                               contentType: String = "application/json", over stream: any ByteStream,
                               deadline: ContinuousClock.Instant, maxBody: Int = HTTPSExchange.maxBody) throws(NetError) -> Response {
        var request = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nUser-Agent: syncpeer\r\nAccept: application/json\r\nConnection: close\r\n"
        if let body { request += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n" }
        request += "\r\n"
        try stream.write(Array(request.utf8) + (body ?? []))
        var reader = Reader(stream: stream, deadline: deadline, maxBody: maxBody)
        let head = try reader.head()
        let response = try parseHead(head, server: stream.remoteDescription)
        let noBody = method == "HEAD" || response.status == 204 || response.status == 304 || (100..<200).contains(response.status)
        let content: [UInt8]
        if noBody {
            content = []
        } else if response.headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            content = try reader.chunked()
        } else if let length = response.headers["content-length"] {
            guard let count = Int(length.httpTrimmed), count >= 0 else {
                throw .protocolViolation("\(stream.remoteDescription) sent a bad Content-Length")
            }
            guard count <= maxBody else {
                throw .protocolViolation("\(stream.remoteDescription) answered \(count) bytes, more than the \(maxBody) accepted")
            }
            content = try reader.exactly(count)
        } else {
            content = try reader.untilClosed()
        }
        return Response(status: response.status, headers: response.headers, body: content)
    }

    static func parseHead(_ head: [UInt8], server: String) throws(NetError) -> (status: Int, headers: [String: String]) {
        let lines = head.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { String(decoding: $0.last == UInt8(ascii: "\r") ? $0.dropLast() : $0, as: UTF8.self) }
        let statusParts = lines.first?.split(separator: " ", maxSplits: 2) ?? []
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]),
              (100..<600).contains(status) else {
            throw .protocolViolation("\(server) did not answer with an HTTP/1.x status line")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else {
                throw .protocolViolation("\(server) sent a malformed HTTP header line")
            }
            let name = line[..<colon].lowercased()
            if headers[name] == nil { headers[name] = String(line[line.index(after: colon)...]).httpTrimmed }
        }
        return (status, headers)
    }

    /// Buffered, bounded reads from the stream.
    struct Reader {
        let stream: any ByteStream
        let deadline: ContinuousClock.Instant
        let maxBody: Int
        var buffer: [UInt8] = []
        var closed = false

        mutating func fill() throws(NetError) {
            let bytes = try stream.read(maxCount: 16_384, deadline: deadline)
            if bytes.isEmpty { closed = true } else { buffer += bytes }
        }

        mutating func head() throws(NetError) -> [UInt8] {
            while true {
                if let end = headEnd() {
                    let head = Array(buffer[0..<end])
                    buffer.removeFirst(end + 4)
                    return head
                }
                guard buffer.count <= HTTPSExchange.maxHead else {
                    throw .protocolViolation("\(stream.remoteDescription) sent more than \(HTTPSExchange.maxHead) bytes of HTTP headers")
                }
                guard !closed else { throw .closed("\(stream.remoteDescription) closed before the HTTP response's headers ended") }
                try fill()
            }
        }

        private func headEnd() -> Int? {
            guard buffer.count >= 4 else { return nil }
            for i in 0...(min(buffer.count, HTTPSExchange.maxHead + 4) - 4)
            where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                return i
            }
            return nil
        }

        mutating func exactly(_ count: Int) throws(NetError) -> [UInt8] {
            while buffer.count < count {
                guard !closed else { throw .closed("\(stream.remoteDescription) closed in the middle of the HTTP body") }
                try fill()
            }
            let body = Array(buffer[0..<count])
            buffer.removeFirst(count)
            return body
        }

        mutating func untilClosed() throws(NetError) -> [UInt8] {
            while !closed {
                guard buffer.count <= maxBody else {
                    throw .protocolViolation("\(stream.remoteDescription) answered more than the \(maxBody) bytes accepted")
                }
                try fill()
            }
            guard buffer.count <= maxBody else {
                throw .protocolViolation("\(stream.remoteDescription) answered more than the \(maxBody) bytes accepted")
            }
            return buffer
        }

        mutating func line() throws(NetError) -> String {
            while true {
                if let end = buffer.firstIndex(of: 10) {
                    let line = String(decoding: buffer[0..<end], as: UTF8.self)
                    buffer.removeFirst(end + 1)
                    return line.httpTrimmed
                }
                guard buffer.count <= 1_024, !closed else {
                    throw .protocolViolation("\(stream.remoteDescription) sent a malformed chunked HTTP body")
                }
                try fill()
            }
        }

        mutating func chunked() throws(NetError) -> [UInt8] {
            var body: [UInt8] = []
            while true {
                let sizeText = try line().split(separator: ";").first.map(String.init) ?? ""
                guard let size = Int(sizeText, radix: 16), size >= 0 else {
                    throw .protocolViolation("\(stream.remoteDescription) sent a malformed chunk size")
                }
                if size == 0 { return body }
                guard body.count + size <= maxBody else {
                    throw .protocolViolation("\(stream.remoteDescription) answered more than the \(maxBody) bytes accepted")
                }
                body += try exactly(size)
                _ = try line()
            }
        }
    }
}

extension StringProtocol {
    var httpTrimmed: String {
        String(drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }
}
