import Foundation
import PeerCrypto
import PeerNet
import Synchronization
import Testing
@testable import Wormhole

/// Hostile mailbox servers and transit peers on loopback: every size they send is bounded
/// before anything is allocated, and every malformed answer ends in a clear error.
struct HostileServerTests {
    /// A one-connection server on 127.0.0.1 that runs `script` on a thread.
    static func server(_ script: @escaping @Sendable (TCPConnection) throws -> Void) throws -> UInt16 {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        Thread.detachNewThread {
            guard let connection = try? listener.accept() else { return }
            try? script(connection)
            Thread.sleep(forTimeInterval: 0.5)
            connection.close()
            listener.close()
        }
        return listener.port
    }

    /// Reads the client's opening handshake and answers it (or with `accept` when given).
    static func upgrade(_ connection: TCPConnection, accept: String? = nil) throws {
        var head: [UInt8] = []
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) { head += try connection.read(maxCount: 1, deadline: nil) }
        let text = String(decoding: head, as: UTF8.self)
        let key = text.firstMatch(of: /Sec-WebSocket-Key: (\S+)/).map { String($0.1) } ?? ""
        let expected = Data(SHA1.hash(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
        try connection.write(Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept ?? expected)\r\n\r\n".utf8))
    }

    static func textFrame(_ text: String, fin: Bool = true, opcode: UInt8 = 1) -> [UInt8] {
        let payload = Array(text.utf8)
        precondition(payload.count < 126)
        return [(fin ? 0x80 : 0) | opcode, UInt8(payload.count)] + payload
    }

    @Test func wrongAcceptKeyIsRefused() throws {
        let port = try Self.server { try Self.upgrade($0, accept: "bm90IHRoZSByaWdodCBrZXk=") }
        #expect(throws: NetError.handshakeFailed("the server's WebSocket accept key is wrong")) {
            try WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/v1", timeout: .seconds(5))
        }
    }

    @Test func endlessHandshakeResponseIsCutAtTheBound() throws {
        let port = try Self.server { connection in
            try connection.write(Array("HTTP/1.1 101 OK\r\n".utf8))
            for _ in 0..<40 { try connection.write([UInt8](repeating: 0x41, count: 1024)) }
        }
        #expect(throws: NetError.protocolViolation("WebSocket handshake response over \(WebSocketClient.maxHandshakeLength) bytes")) {
            try WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/", timeout: .seconds(5))
        }
    }

    /// A frame header that claims 2^62 bytes is refused from the header alone; fragments
    /// that add up past the bound are refused too; a ping in between is answered.
    @Test(arguments: [
        [0x81, 127, 0x40, 0, 0, 0, 0, 0, 0, 0],
        textFrame("abc", fin: false) + [0x00, 126, 0xFF, 0xFF],
    ] as [[UInt8]])
    func oversizedMessagesAreRefused(_ frames: [UInt8]) throws {
        let port = try Self.server { connection in
            try Self.upgrade(connection)
            try connection.write(frames)
        }
        let client = try WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/v1", timeout: .seconds(5), maxMessageLength: 60_000)
        defer { client.close() }
        #expect(throws: NetError.protocolViolation("WebSocket message over 60000 bytes")) {
            try client.receiveText(deadline: .now + .seconds(5))
        }
    }

    @Test func fragmentsAreJoinedAndPingsAnswered() throws {
        let pong = Mutex<[UInt8]>([])
        let port = try Self.server { connection in
            try Self.upgrade(connection)
            try connection.write(Self.textFrame("hel", fin: false) + [0x89, 2, 0x68, 0x69] + Self.textFrame("lo", opcode: 0))
            // The client's pong: masked, so 2 header bytes + 4 mask + 2 payload.
            var got: [UInt8] = []
            while got.count < 8 { got += try connection.read(maxCount: 8 - got.count, deadline: .now + .seconds(5)) }
            let unmasked = [got[0], got[1] & 0x7F] + got[6...].enumerated().map { $0.element ^ got[2 + $0.offset] }
            pong.withLock { $0 = unmasked }
        }
        let client = try WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/v1", timeout: .seconds(5))
        defer { client.close() }
        #expect(try client.receiveText(deadline: .now + .seconds(5)) == "hello")
        Thread.sleep(forTimeInterval: 0.2)
        #expect(pong.withLock { $0 } == [0x8A, 2, 0x68, 0x69])
    }

    @Test(arguments: ["not json", #"{"no":"type"}"#, #"{"type":"message","side":"x","phase":"pake","body":"zz"}"#])
    func malformedMailboxMessagesAreRefused(_ text: String) throws {
        let port = try Self.server { connection in
            try Self.upgrade(connection)
            try connection.write(Self.textFrame(#"{"type":"welcome","welcome":{}}"#))
            try connection.write(Self.textFrame(text))
        }
        let mailbox = try MailboxClient.connect(url: "ws://127.0.0.1:\(port)/v1", appid: "a", timeout: .seconds(5))
        defer { mailbox.close(nil, mood: "errory") }
        #expect(throws: WormholeError.self) { try mailbox.nextMessage(deadline: .now + .seconds(5)) }
    }

    @Test func aServerThatRefusesUsSaysWhy() throws {
        let port = try Self.server { connection in
            try Self.upgrade(connection)
            try connection.write(Self.textFrame(#"{"type":"welcome","welcome":{"error":"go away"}}"#))
        }
        #expect(throws: WormholeError.server("refused us: go away")) {
            try MailboxClient.connect(url: "ws://127.0.0.1:\(port)/v1", appid: "a", timeout: .seconds(5))
        }
    }

    /// A transit record whose length prefix says 4 GiB is refused before reading it.
    @Test func oversizedTransitRecordIsRefused() throws {
        let port = try Self.server { try $0.write([0xFF, 0xFF, 0xFF, 0xF0] + [UInt8](repeating: 0, count: 64)) }
        let stream = try TCPConnection.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        let key = SecureBytes([UInt8](repeating: 7, count: 32))
        let transit = try TransitConnection(stream: stream, sendKey: key, receiveKey: key, description: "test", leftover: [])
        defer { transit.close() }
        #expect(throws: WormholeError.protocolViolation("transit record of 4294967280 bytes (limit \(TransitConnection.maxRecord))")) {
            try transit.receive(deadline: .now + .seconds(5))
        }
    }

    /// A server that floods us with the other side's messages while we wait for a reply:
    /// the queue stops at its bound with a clear error.
    @Test func aFloodOfMessagesIsBounded() throws {
        let port = try Self.server { connection in
            try Self.upgrade(connection)
            try connection.write(Self.textFrame(#"{"type":"welcome","welcome":{}}"#))
            for i in 0..<(MailboxClient.maxQueued + 10) {
                try connection.write(Self.textFrame(#"{"type":"message","side":"other","phase":"\#(i)","body":"00"}"#))
            }
        }
        let mailbox = try MailboxClient.connect(url: "ws://127.0.0.1:\(port)/v1", appid: "a", timeout: .seconds(5))
        defer { mailbox.close(nil, mood: "errory") }
        #expect(throws: WormholeError.protocolViolation("more than \(MailboxClient.maxQueued) messages queued")) { try mailbox.allocate() }
    }

    /// Garbage after the handshake ends in an error, never a crash or a hang.
    @Test func garbageFramesEndInAnError() throws {
        for seed in 0..<20 {
            let garbage = (0..<300).map { UInt8(truncatingIfNeeded: ($0 &+ seed) &* 2_654_435_761 >> 7) }
            let port = try Self.server { connection in
                try Self.upgrade(connection)
                try connection.write(garbage)
            }
            let client = try WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/v1", timeout: .seconds(5), maxMessageLength: 4096)
            defer { client.close() }
            var ended = false
            for _ in 0..<50 {
                do {
                    guard try client.receiveText(deadline: .now + .seconds(2)) != nil else { ended = true; break }
                } catch { ended = true; break }
            }
            #expect(ended)
        }
    }
}
