internal import Glibc

/// A numeric IPv4 or IPv6 socket address as the kernel returns it (`accept`,
/// `getsockname`, `getpeername`, `getaddrinfo`).
struct SocketAddress: Sendable {
    var storage: sockaddr_storage
    var length: socklen_t

    init(storage: sockaddr_storage, length: socklen_t) {
        self.storage = storage
        self.length = length
    }

    init(copying address: UnsafePointer<sockaddr>, length: socklen_t) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(start: address, count: min(Int(length), target.count)))
        }
        self.init(storage: storage, length: length)
    }

    /// The local (`getsockname`) or remote (`getpeername`) address of `fd`.
    static func of(_ fd: Int32, remote: Bool) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                remote ? getpeername(fd, $0, &length) : getsockname(fd, $0, &length)
            }
        }
        return result == 0 ? SocketAddress(storage: storage, length: length) : nil
    }

    var family: Int32 { Int32(storage.ss_family) }
    var isIPv6: Bool { family == AF_INET6 }

    /// The port, in host byte order (0 for a non-IP address).
    var port: UInt16 {
        withUnsafeBytes(of: storage) { raw -> UInt16 in
            switch family {
            case AF_INET: return UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port)
            case AF_INET6: return UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)
            default: return 0
            }
        }
    }

    /// The numeric host: "127.0.0.1", "::1". An IPv4-mapped IPv6 address
    /// ("::ffff:127.0.0.1") is shown as plain IPv4; a link-local one with its interface
    /// ("fe80::1%eth0"), so that it can be dialled again.
    var host: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        var zone = ""
        let written: Bool = withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET:
                var address = raw.load(as: sockaddr_in.self).sin_addr
                return inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil
            case AF_INET6:
                let sin6 = raw.load(as: sockaddr_in6.self)
                var address = sin6.sin6_addr
                var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
                if sin6.sin6_scope_id != 0, if_indextoname(sin6.sin6_scope_id, &name) != nil {
                    zone = "%" + String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                }
                return inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil
            default:
                return false
            }
        }
        guard written else { return "?" }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("::ffff:"), text.contains(".") { return String(text.dropFirst(7)) }
        return text + zone
    }

    /// "host:port", or "[v6]:port".
    var description: String {
        HostPort(host: host, port: port).description
    }
}

/// A host and a port, as written by users: "host:port", "192.0.2.7:22000" or "[::1]:22000".
///
/// Port 0 is accepted (it means "any free port" to a listener); connecting to it fails.
package struct HostPort: Sendable, Hashable, CustomStringConvertible {
    /// A name ("localhost") or a numeric address, without brackets.
    package var host: String
    package var port: UInt16

    package init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses "host:port" or "[ipv6]:port".
    package init(parsing text: String) throws(NetError) {
        let quoted = "\"\(text)\""
        guard !text.isEmpty else { throw .invalidAddress("empty address (expected host:port)") }
        guard !text.contains(where: { $0.isWhitespace }) else {
            throw .invalidAddress("\(quoted) contains spaces (expected host:port)")
        }
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw .invalidAddress("\(quoted) has no closing ']' (expected [ipv6]:port)")
            }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else {
                throw .invalidAddress("missing port in \(quoted) (expected [ipv6]:port)")
            }
            portPart = rest.dropFirst()
            guard !hostPart.isEmpty else { throw .invalidAddress("empty host in \(quoted) (expected [ipv6]:port)") }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw .invalidAddress("missing port in \(quoted) (expected host:port)")
            }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") {
                throw .invalidAddress("IPv6 address in \(quoted) needs brackets, as in [::1]:22000")
            }
            guard !hostPart.isEmpty else { throw .invalidAddress("empty host in \(quoted) (expected host:port)") }
            if hostPart.contains("[") || hostPart.contains("]") {
                throw .invalidAddress("misplaced bracket in \(quoted) (expected host:port or [ipv6]:port)")
            }
        }
        guard !portPart.isEmpty else { throw .invalidAddress("missing port in \(quoted) (expected host:port)") }
        guard portPart.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw .invalidAddress("port \"\(portPart)\" in \(quoted) is not a number")
        }
        guard portPart.count <= 5, let port = UInt16(portPart) else {
            throw .invalidAddress("port \(portPart) in \(quoted) is out of range (0–65535)")
        }
        self.init(host: String(hostPart), port: port)
    }

    /// "host:port", or "[host]:port" when the host is an IPv6 address.
    package var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
