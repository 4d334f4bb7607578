internal import PeerNet

/// Talks to a running node over its control socket (see `ControlServer`).
public final class ControlClient: Sendable {
    let connection: UnixConnection
    private let reader: LineReaderBox

    /// Connects to the daemon of `home`, or says how to start one.
    public static func connect(home: NodeHome) throws(EngineError) -> ControlClient {
        do {
            return ControlClient(connection: try UnixConnection.connect(path: home.controlSocket, timeout: .seconds(5)))
        } catch {
            throw .notFound("no syncpeer daemon is running for \(home.path): start one with 'syncpeer --home \(home.path) daemon' (in another terminal, or in the background with '&')")
        }
    }

    init(connection: UnixConnection) {
        self.connection = connection
        self.reader = LineReaderBox(LineReader(connection))
    }

    deinit { connection.close() }

    /// Sends one request and waits for its final answer; progress events go to `onEvent`.
    public func request(_ op: String, _ arguments: [String: JSONValue] = [:],
                        onEvent: (JSONValue) -> Void = { _ in }) throws(EngineError) -> JSONValue {
        var object = arguments
        object["op"] = .string(op)
        object["id"] = 1
        do { try connection.write(Array((JSONValue.object(object).encodedLine() + "\n").utf8)) } catch {
            throw .network("lost the daemon: \(error.description)")
        }
        while true {
            guard let line = try nextLine(), let answer = JSONValue.parse(line) else {
                throw .network("the daemon closed the control connection")
            }
            if let event = answer["event"] {
                onEvent(event)
                continue
            }
            if answer["ok"]?.boolValue == true { return answer["result"] ?? .null }
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

    /// Subscribes to every event and calls `onEvent` until the daemon goes away.
    public func streamEvents(_ onEvent: (JSONValue) -> Bool) throws(EngineError) {
        _ = try request("events")
        while let line = try nextLine() {
            guard let answer = JSONValue.parse(line), let event = answer["event"] else { continue }
            if !onEvent(event) { return }
        }
    }

    private func nextLine() throws(EngineError) -> String? {
        do { return try reader.readLine() } catch { throw .network("lost the daemon: \(error.description)") }
    }

    /// Lets the Sendable client own a mutating reader (used by one thread at a time).
    final class LineReaderBox: @unchecked Sendable {
        // @unchecked: a client is used by one thread at a time (the CLI's).
        var reader: LineReader
        init(_ reader: LineReader) { self.reader = reader }
        func readLine() throws(NetError) -> String? { try reader.readLine() }
    }
}
