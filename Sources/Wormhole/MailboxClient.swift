internal import FoundationEssentials
internal import PeerCrypto
internal import PeerNet
internal import Synchronization

/// The client half of Magic Wormhole's mailbox ("rendezvous") server protocol: JSON objects
/// in WebSocket text messages (magic-wormhole docs/server-protocol.md).
///
///     bind → allocate → claim(nameplate) → open(mailbox) → add(phase, body)* … → release → close
///
/// The server acks each request and echoes each `add` to everyone on the mailbox,
/// including us; our own echoes are dropped here. Every message from the server is bounded
/// (`maxServerMessage`), and so is the queue of messages waiting to be asked for.
/// One thread reads; `abandon` may come from another. The queue sits in a `Mutex`.
final class MailboxClient: Sendable {
    static let maxServerMessage = 1 << 20
    static let maxQueued = 64

    /// One `message` from the other side.
    struct Message: Equatable, Sendable {
        let side: String
        let phase: String
        let body: [UInt8]
    }

    let side: String
    private let socket: WebSocketClient
    private let timeout: Duration
    private let queued = Mutex<[Message]>([])

    private init(socket: WebSocketClient, side: String, timeout: Duration) {
        self.socket = socket
        self.side = side
        self.timeout = timeout
    }

    /// Connects, reads the welcome and binds to `appid` with a new random side.
    static func connect(url: String, appid: String, timeout: Duration) throws(WormholeError) -> MailboxClient {
        let socket: WebSocketClient
        do { socket = try WebSocketClient.connect(url: url, timeout: timeout, maxMessageLength: maxServerMessage) } catch {
            throw .server("cannot connect to \(url): \(error)")
        }
        let client = MailboxClient(socket: socket, side: hex(secureRandomBytes(5)), timeout: timeout)
        do {
            let welcome = try client.awaitReply("welcome")
            if let info = welcome["welcome"] as? [String: Any], let error = info["error"] as? String {
                throw WormholeError.server("refused us: \(error.prefix(200))")
            }
            try client.send(["type": "bind", "appid": appid, "side": client.side, "client_version": ["syncpeer", "1"]])
        } catch let error as WormholeError {
            socket.close()
            throw error
        } catch {
            socket.close()
            throw .server("\(error)")
        }
        return client
    }

    func allocate() throws(WormholeError) -> String {
        try send(["type": "allocate"])
        guard let nameplate = try awaitReply("allocated")["nameplate"] as? String, nameplate.count <= 32 else {
            throw .protocolViolation("allocated without a nameplate")
        }
        return nameplate
    }

    func claim(_ nameplate: String) throws(WormholeError) -> String {
        try send(["type": "claim", "nameplate": nameplate])
        guard let mailbox = try awaitReply("claimed")["mailbox"] as? String, mailbox.count <= 64 else {
            throw .protocolViolation("claimed without a mailbox")
        }
        return mailbox
    }

    func open(_ mailbox: String) throws(WormholeError) {
        try send(["type": "open", "mailbox": mailbox])
    }

    func add(phase: String, body: [UInt8]) throws(WormholeError) {
        try send(["type": "add", "phase": phase, "body": hex(body)])
    }

    func release(_ nameplate: String) throws(WormholeError) {
        try send(["type": "release", "nameplate": nameplate])
        _ = try awaitReply("released")
    }

    /// Closes the mailbox with a mood ("happy", "scary", "errory", "lonely") and the socket.
    func close(_ mailbox: String?, mood: String) {
        if let mailbox {
            try? send(["type": "close", "mailbox": mailbox, "mood": mood])
            _ = try? awaitReply("closed")
        }
        socket.close()
    }

    /// From another thread than the reader: asks the server to close the mailbox and closes
    /// the socket at once (which wakes the reader), without waiting for the answer.
    func abandon(_ mailbox: String, mood: String) {
        try? send(["type": "close", "mailbox": mailbox, "mood": mood])
        socket.close()
    }

    /// The next message from the other side, waiting up to `deadline`.
    func nextMessage(deadline: ContinuousClock.Instant? = nil) throws(WormholeError) -> Message {
        if let first = queued.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return first }
        while true {
            let object = try receiveObject(deadline: deadline)
            if let message = try Self.message(object), message.side != side { return message }
        }
    }

    /// Reads until a reply of `type`, queueing the other side's messages met on the way.
    func awaitReply(_ type: String) throws(WormholeError) -> [String: Any] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let object = try receiveObject(deadline: deadline)
            if object["type"] as? String == type { return object }
            if let message = try Self.message(object), message.side != side {
                let added = queued.withLock { queued in
                    guard queued.count < Self.maxQueued else { return false }
                    queued.append(message)
                    return true
                }
                guard added else { throw .protocolViolation("more than \(Self.maxQueued) messages queued") }
            }
        }
    }

    private static func message(_ object: [String: Any]) throws(WormholeError) -> Message? {
        guard object["type"] as? String == "message" else { return nil }
        guard let side = object["side"] as? String, side.count <= 64, let phase = object["phase"] as? String, phase.count <= 64,
              let bodyHex = object["body"] as? String, let body = bytes(fromHex: bodyHex)
        else { throw .protocolViolation("malformed mailbox message") }
        return Message(side: side, phase: phase, body: body)
    }

    private func receiveObject(deadline: ContinuousClock.Instant?) throws(WormholeError) -> [String: Any] {
        let text: String?
        do { text = try socket.receiveText(deadline: deadline) } catch {
            if case .timedOut = error { throw .timedOut("waiting for the mailbox server") }
            throw .server("\(error)")
        }
        guard let text else { throw .server("the server closed the connection") }
        guard let object = JSONValue.object(parsing: text.utf8), let type = object["type"] as? String else {
            throw .protocolViolation("the server sent something that is not a JSON object with a type")
        }
        if type == "error" {
            throw .server("\((object["error"] as? String)?.prefix(200) ?? "error")")
        }
        return object
    }

    private func send(_ object: [String: Any]) throws(WormholeError) {
        var object = object
        object["id"] = hex(secureRandomBytes(2))
        guard let data = JSONValue.bytes(of: object), let text = String(validating: data, as: UTF8.self) else {
            throw .protocolViolation("cannot encode a mailbox request")
        }
        do { try socket.sendText(text) } catch { throw .server("\(error)") }
    }
}
