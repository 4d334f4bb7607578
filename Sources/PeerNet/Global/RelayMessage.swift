package import PeerCrypto

/// A message of Syncthing's Relay Protocol v1 (`strelaysrv`): a 12-byte header (magic
/// 0x9E79BC40, type, length, big-endian) and an XDR body (opaque and string fields as a u32
/// length, the bytes and zero padding to 4; a u16 or a bool in 4 bytes).
package enum RelayMessage: Equatable, Sendable {
    case ping
    case pong
    case joinRelayRequest
    case joinSessionRequest(key: [UInt8])
    case response(code: Int32, message: String)
    case connectRequest(id: [UInt8])
    case sessionInvitation(RelayInvitation)
    case relayFull

    package static let magic: UInt32 = 0x9E79_BC40
    /// Bodies are tiny (an invitation is at most 124 bytes); a longer one is a protocol violation.
    package static let maxBody = 1_024

    var type: Int32 {
        switch self {
        case .ping: 0
        case .pong: 1
        case .joinRelayRequest: 2
        case .joinSessionRequest: 3
        case .response: 4
        case .connectRequest: 5
        case .sessionInvitation: 6
        case .relayFull: 7
        }
    }

    package func encode() -> [UInt8] {
        var body = XDR()
        switch self {
        case .ping, .pong, .joinRelayRequest, .relayFull: break
        case let .joinSessionRequest(key): body.opaque(key)
        case let .response(code, message): body.u32(UInt32(bitPattern: code)); body.opaque(Array(message.utf8))
        case let .connectRequest(id): body.opaque(id)
        case let .sessionInvitation(invitation):
            body.opaque(invitation.from); body.opaque(invitation.key); body.opaque(invitation.address)
            body.u32(UInt32(invitation.port)); body.u32(invitation.serverSocket ? 1 : 0)
        }
        var header = XDR()
        header.u32(Self.magic)
        header.u32(UInt32(bitPattern: type))
        header.u32(UInt32(body.bytes.count))
        return header.bytes + body.bytes
    }

    /// Reads one message from `stream` before `deadline`, every length checked.
    package static func read(from stream: any ByteStream, deadline: ContinuousClock.Instant) throws(NetError) -> RelayMessage {
        let header = try readExactly(12, from: stream, deadline: deadline)
        var reader = XDRReader(bytes: header, peer: stream.remoteDescription)
        guard try reader.u32() == magic else {
            throw .protocolViolation("\(stream.remoteDescription) does not speak the relay protocol (bad magic)")
        }
        let type = Int32(bitPattern: try reader.u32())
        let length = Int(try reader.u32())
        guard length <= maxBody else {
            throw .protocolViolation("\(stream.remoteDescription) sent a relay message of \(length) bytes (at most \(maxBody))")
        }
        var body = XDRReader(bytes: try readExactly(length, from: stream, deadline: deadline), peer: stream.remoteDescription)
        let message: RelayMessage
        switch type {
        case 0: message = .ping
        case 1: message = .pong
        case 2: message = .joinRelayRequest
        case 3: message = .joinSessionRequest(key: try body.opaque(max: 32))
        case 4:
            let code = Int32(bitPattern: try body.u32())
            message = .response(code: code, message: String(decoding: try body.opaque(max: 256), as: UTF8.self))
        case 5: message = .connectRequest(id: try body.opaque(max: 32))
        case 6:
            let from = try body.opaque(max: 32), key = try body.opaque(max: 32), address = try body.opaque(max: 32)
            let port = try body.u32()
            let server = try body.u32()
            guard port <= 0xFFFF, server <= 1 else {
                throw .protocolViolation("\(stream.remoteDescription) sent a malformed session invitation")
            }
            message = .sessionInvitation(RelayInvitation(from: from, key: key, address: address, port: UInt16(port), serverSocket: server == 1))
        case 7: message = .relayFull
        default: throw .protocolViolation("\(stream.remoteDescription) sent an unknown relay message type \(type)")
        }
        guard body.remaining == 0 else {
            throw .protocolViolation("\(stream.remoteDescription) sent a relay message with trailing bytes")
        }
        return message
    }

    static func readExactly(_ count: Int, from stream: any ByteStream, deadline: ContinuousClock.Instant) throws(NetError) -> [UInt8] {
        var bytes: [UInt8] = []
        while bytes.count < count {
            let more = try stream.read(maxCount: count - bytes.count, deadline: deadline)
            guard !more.isEmpty else { throw .closed("\(stream.remoteDescription) closed the relay connection") }
            bytes += more
        }
        return bytes
    }
}

/// A relay's invitation to a session: who is at the other end (`from`, a certificate ID's
/// 32 bytes), the key that joins the session, where (`address` empty or unspecified: the
/// relay's own host), and whether we are the session's server side (we were asked for).
package struct RelayInvitation: Equatable, Sendable {
    package var from: [UInt8]
    package var key: [UInt8]
    package var address: [UInt8]
    package var port: UInt16
    package var serverSocket: Bool

    package init(from: [UInt8], key: [UInt8], address: [UInt8], port: UInt16, serverSocket: Bool) {
        self.from = from
        self.key = key
        self.address = address
        self.port = port
        self.serverSocket = serverSocket
    }

    /// Who the relay says is at the other end.
    package var peer: CertificateID? { CertificateID(hash: from) }
}

struct XDR {
    var bytes: [UInt8] = []
    mutating func u32(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }
    mutating func opaque(_ data: [UInt8]) {
        u32(UInt32(data.count))
        bytes += data
        bytes += [UInt8](repeating: 0, count: (4 - data.count % 4) % 4)
    }
}

struct XDRReader {
    let bytes: [UInt8]
    let peer: String
    var offset = 0
    var remaining: Int { bytes.count - offset }

    mutating func u32() throws(NetError) -> UInt32 {
        guard remaining >= 4 else { throw .protocolViolation("\(peer) sent a truncated relay message") }
        defer { offset += 4 }
        return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func opaque(max: Int) throws(NetError) -> [UInt8] {
        let length = Int(try u32())
        let padded = length + (4 - length % 4) % 4
        guard length <= max, remaining >= padded else {
            throw .protocolViolation("\(peer) sent a relay message field of \(length) bytes (at most \(max))")
        }
        defer { offset += padded }
        return Array(bytes[offset..<offset + length])
    }
}
