package import FoundationEssentials
internal import PeerCrypto
internal import Synchronization

/// A WebSocket client (RFC 6455) over plain TCP, for text messages: the opening handshake,
/// masked frames out, fragmented messages in, ping/pong and the closing handshake.
///
/// Every size from the server is bounded before anything is allocated: the handshake
/// response (`maxHandshakeLength`), one message (`maxMessageLength`, over all its fragments).
/// One thread reads (`receiveText`); any thread may send.
package final class WebSocketClient: Sendable {
    package static let maxHandshakeLength = 16 * 1024
    package static let defaultMaxMessageLength = 1 << 20

    private let connection: TCPConnection
    private let reader: Reader
    package let maxMessageLength: Int

    /// A `ws://host:port/path` URL split into its parts.
    package struct Endpoint: Sendable, Equatable {
        package let host: String
        package let port: UInt16
        package let path: String

        package init(parsing url: String) throws(NetError) {
            guard let c = URLComponents(string: url), c.scheme?.lowercased() == "ws", let host = c.host, !host.isEmpty else {
                throw NetError.invalidAddress("\(url): expected ws://HOST:PORT/PATH (wss:// is not supported)")
            }
            self.host = host
            guard let port = UInt16(exactly: c.port ?? 80), port != 0 else { throw NetError.invalidAddress("\(url): bad port") }
            self.port = port
            self.path = c.percentEncodedPath.isEmpty ? "/" : c.percentEncodedPath
        }
    }

    private init(connection: TCPConnection, reader: Reader, maxMessageLength: Int) {
        self.connection = connection
        self.reader = reader
        self.maxMessageLength = maxMessageLength
    }

    /// Connects to `url` and completes the opening handshake by `timeout`.
    package static func connect(url: String, timeout: Duration, maxMessageLength: Int = defaultMaxMessageLength) throws(NetError) -> WebSocketClient {
        let endpoint = try Endpoint(parsing: url)
        let connection = try TCPConnection.connect(host: endpoint.host, port: endpoint.port, timeout: timeout)
        let deadline = ContinuousClock.now + timeout
        do {
            let key = Data(secureRandomBytes(16)).base64EncodedString()
            let hostHeader = endpoint.port == 80 ? endpoint.host : "\(endpoint.host):\(endpoint.port)"
            let request = "GET \(endpoint.path) HTTP/1.1\r\nHost: \(hostHeader)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
            try connection.write(Array(request.utf8))
            let reader = Reader(connection)
            let head = try reader.readHead(limit: maxHandshakeLength, deadline: deadline)
            try checkHandshake(head, key: key)
            return WebSocketClient(connection: connection, reader: reader, maxMessageLength: maxMessageLength)
        } catch {
            connection.close()
            throw error
        }
    }

    static func checkHandshake(_ head: String, key: String) throws(NetError) {
        let lines = head.components(separatedBy: "\r\n")
        guard let status = lines.first, status.hasPrefix("HTTP/1.1 101") else {
            throw NetError.handshakeFailed("the server did not switch to WebSocket: \(lines.first?.prefix(80) ?? "")")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = HTTPText.trimmed(line[line.index(after: colon)...])
        }
        let expected = Data(SHA1.hash(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
        guard headers["upgrade"]?.lowercased() == "websocket", headers["sec-websocket-accept"] == expected else {
            throw NetError.handshakeFailed("the server's WebSocket accept key is wrong")
        }
    }

    /// Sends one text message in one masked frame.
    package func sendText(_ text: String) throws(NetError) {
        try connection.write(Self.frame(opcode: 0x1, payload: Array(text.utf8)))
    }

    /// The next text message, answering pings on the way; nil once the server closed.
    /// Throws `protocolViolation` for a binary message, a bad frame or one over the bound.
    package func receiveText(deadline: ContinuousClock.Instant?) throws(NetError) -> String? {
        var message: [UInt8] = []
        var inMessage = false
        while true {
            let first = try reader.readExactly(2, deadline: deadline)
            let fin = first[0] & 0x80 != 0, opcode = first[0] & 0x0F
            guard first[0] & 0x70 == 0 else { throw NetError.protocolViolation("WebSocket frame with reserved bits") }
            guard first[1] & 0x80 == 0 else { throw NetError.protocolViolation("masked WebSocket frame from the server") }
            var length = UInt64(first[1] & 0x7F)
            if length == 126 {
                length = try reader.readExactly(2, deadline: deadline).reduce(0) { $0 << 8 | UInt64($1) }
            } else if length == 127 {
                length = try reader.readExactly(8, deadline: deadline).reduce(0) { $0 << 8 | UInt64($1) }
            }
            let isControl = opcode & 0x08 != 0
            guard isControl ? length <= 125 : length <= UInt64(maxMessageLength - message.count) else {
                throw NetError.protocolViolation("WebSocket message over \(maxMessageLength) bytes")
            }
            let payload = try reader.readExactly(Int(length), deadline: deadline)
            switch opcode {
            case 0x8:
                try? connection.write(Self.frame(opcode: 0x8, payload: Array(payload.prefix(2))))
                return nil
            case 0x9:
                try connection.write(Self.frame(opcode: 0xA, payload: payload))
                continue
            case 0xA:
                continue
            case 0x1 where !inMessage, 0x0 where inMessage:
                message += payload
                inMessage = true
            default:
                throw NetError.protocolViolation("unexpected WebSocket opcode \(opcode)")
            }
            if fin {
                guard let text = String(validating: message, as: UTF8.self) else {
                    throw NetError.protocolViolation("WebSocket text message is not UTF-8")
                }
                return text
            }
        }
    }

    /// Sends a close frame (normal closure) and closes the socket.
    package func close() {
        try? connection.write(Self.frame(opcode: 0x8, payload: [0x03, 0xE8]))
        connection.close()
    }

    /// One final, masked client frame.
    static func frame(opcode: UInt8, payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x80 | opcode]
        switch payload.count {
        case ..<126: out.append(0x80 | UInt8(payload.count))
        case ..<65536: out += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: out.append(0x80 | 127); out += (0..<8).reversed().map { UInt8(truncatingIfNeeded: UInt64(payload.count) >> (8 * UInt64($0))) }
        }
        let mask = secureRandomBytes(4)
        out += mask
        out += payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
        return out
    }

    /// A read buffer over the connection, for the one reading thread. The buffer sits in a
    /// `Mutex` so the type is checked `Sendable`; the lock is never held across a read.
    final class Reader: Sendable {
        private let stream: any ByteStream
        private let buffer = Mutex<[UInt8]>([])

        init(_ stream: any ByteStream) { self.stream = stream }

        func readExactly(_ count: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> [UInt8] {
            while true {
                let missing: Int = buffer.withLock { $0.count >= count ? 0 : count - $0.count }
                if missing == 0 { break }
                let more = try stream.read(maxCount: max(4096, min(missing, 1 << 20)), deadline: deadline)
                guard !more.isEmpty else { throw NetError.closed("the WebSocket server closed the connection") }
                buffer.withLock { $0 += more }
            }
            return buffer.withLock { buffer in
                let out = Array(buffer[0..<count])
                buffer.removeFirst(count)
                return out
            }
        }

        /// The HTTP response head up to the blank line, at most `limit` bytes.
        func readHead(limit: Int, deadline: ContinuousClock.Instant?) throws(NetError) -> String {
            let end: [UInt8] = [13, 10, 13, 10]
            while true {
                let (head, size): (String?, Int) = buffer.withLock { buffer in
                    guard let range = buffer.firstRange(of: end) else { return (nil, buffer.count) }
                    let head = String(decoding: buffer[..<range.lowerBound], as: UTF8.self)
                    buffer.removeSubrange(..<range.upperBound)
                    return (head, 0)
                }
                if let head { return head }
                guard size < limit else { throw NetError.protocolViolation("WebSocket handshake response over \(limit) bytes") }
                let more = try stream.read(maxCount: 4096, deadline: deadline)
                guard !more.isEmpty else { throw NetError.closed("the server closed the connection during the WebSocket handshake") }
                buffer.withLock { $0 += more }
            }
        }
    }
}
