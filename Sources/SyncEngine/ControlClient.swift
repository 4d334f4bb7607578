internal import FoundationEssentials
package import PeerNet
internal import Synchronization

/// Talks to a running node over its control socket (see `ControlServer`).
package final class ControlClient: Sendable {
    let connection: UnixConnection
    private let reader: LineReaderBox

    /// Connects to the daemon of `home`, or says how to start one.
    package static func connect(home: NodeHome) throws(EngineError) -> ControlClient {
        do {
            return ControlClient(connection: try UnixConnection.connect(path: home.controlSocket, timeout: .seconds(5)))
        } catch {
            // A home never initialised has no daemon because it has no identity: say what
            // comes first.
            guard FileManager.default.fileExists(atPath: home.keyFile) else { throw .notInitialised(home: home.path) }
            throw .notFound("no syncpeer daemon is running for \(home.path): start one with 'syncpeer --home \(home.path) daemon' (in another terminal, or in the background with '&')")
        }
    }

    init(connection: UnixConnection) {
        self.connection = connection
        self.reader = LineReaderBox(LineReader(connection))
    }

    deinit { connection.close() }

    /// Tells the daemon this client is going away (its write side closes; answers can still
    /// be read): a `send` that is not detached is cancelled.
    package func hangUp() {
        connection.shutdownWrite()
    }

    /// Sends one request and waits for its final answer, decoded as `T`; progress events
    /// go to `onEvent`.
    package func call<T: Decodable>(_ request: ControlRequest, as type: T.Type = T.self, passing descriptor: Int32? = nil,
                                   onEvent: (NodeEvent) -> Void = { _ in }) throws(EngineError) -> T {
        try self.request(request, passing: descriptor, onEvent: onEvent).decode(as: T.self)
    }

    /// Sends one request and waits for its final answer (as JSON); progress events go to
    /// `onEvent`. `descriptor` travels with the request (`SCM_RIGHTS`) for the ops that
    /// take one (`ControlRequest.passesDescriptor`).
    package func request(_ request: ControlRequest, passing descriptor: Int32? = nil,
                        onEvent: (NodeEvent) -> Void = { _ in }) throws(EngineError) -> JSONValue {
        try exchange(request.json(id: 1), passing: descriptor, onEvent: onEvent)["result"] ?? .null
    }

    /// Asks for a list (`ControlRequest.isPaged`) page after page, `limit` items at a time
    /// from the start or from `after`, and hands each page's result, decoded as `T`, to
    /// `each` as it arrives.
    package func eachPage<T: Decodable>(_ request: ControlRequest, as type: T.Type = T.self, limit: Int = PageRequest.defaultLimit,
                                       after: String? = nil, _ each: (T) -> Void) throws(EngineError) {
        var page = PageRequest(limit: limit, after: after)
        while true {
            let answer = try self.page(request, page)
            each(try (answer["result"] ?? .null).decode(as: T.self))
            // (A daemon that names the same page again would loop: it is the last.)
            guard let next = answer["next"]?.stringValue, next != page.after else { return }
            page.after = next
        }
    }

    /// One page of a list: the answer as the daemon sent it (`ok`, `result`, and `next` while
    /// more follow), without its `id`.
    package func page(_ request: ControlRequest, _ page: PageRequest) throws(EngineError) -> JSONValue {
        var answer: [String: JSONValue] = ["ok": true]
        let whole = try exchange(request.json(id: 1, page: page), passing: nil, onEvent: { _ in })
        answer["result"] = whole["result"] ?? .null
        if let next = whole["next"] { answer["next"] = next }
        return .object(answer)
    }

    /// Writes one request line and reads until its final answer, which it returns whole.
    private func exchange(_ request: JSONValue, passing descriptor: Int32?,
                          onEvent: (NodeEvent) -> Void) throws(EngineError) -> JSONValue {
        let line = Array((request.encodedLine() + "\n").utf8)
        do {
            if let descriptor { try connection.write(line, passing: descriptor) } else { try connection.write(line) }
        } catch {
            throw .connection("lost the daemon", error)
        }
        while true {
            guard let line = try nextLine(), let answer = JSONValue.parse(line) else {
                throw .network("the daemon closed the control connection")
            }
            if let event = answer["event"] {
                // An event of a kind this client does not know (a newer daemon) is skipped.
                if let typed = try? event.decode(as: NodeEvent.self) { onEvent(typed) }
                continue
            }
            if answer["ok"]?.boolValue == true { return answer }
            let message = answer["error"]?.stringValue ?? "unknown error"
            // The daemon's kind, so exit codes and `--json` errors match it; an older daemon
            // sends only a category.
            if let kind = answer["kind"]?.stringValue.flatMap(EngineError.Kind.init(rawValue:)) {
                throw .daemon(kind: kind, message: message)
            }
            switch answer["category"]?.stringValue {
            case "usage": throw .invalidArgument(message)
            case "state": throw .notFound(message)
            case "data": throw .daemon(kind: .index, message: message)
            default: throw .refused(message)
            }
        }
    }

    /// Subscribes to every event and calls `onEvent` until the daemon goes away or it
    /// returns false. Events of kinds this client does not know are skipped.
    package func streamEvents(_ onEvent: (NodeEvent) -> Bool) throws(EngineError) {
        _ = try request(.events)
        while let line = try nextLine() {
            guard let answer = JSONValue.parse(line), let event = try? answer["event"]?.decode(as: NodeEvent.self) else { continue }
            if !onEvent(event) { return }
        }
    }

    private func nextLine() throws(EngineError) -> String? {
        do { return try reader.readLine() } catch { throw .connection("lost the daemon", error) }
    }

    /// Lets the Sendable client own a mutating reader (a client answers one request at a
    /// time; the lock makes that a rule the compiler checks, not a comment).
    final class LineReaderBox: Sendable {
        private let reader: Mutex<LineReader>
        init(_ reader: LineReader) { self.reader = Mutex(reader) }
        func readLine() throws(NetError) -> String? {
            try reader.withLock { (reader: inout LineReader) throws(NetError) -> String? in try reader.readLine() }
        }
    }
}
