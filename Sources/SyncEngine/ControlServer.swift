internal import Foundation
internal import PeerNet
internal import Synchronization

/// The node's local control socket: a Unix-domain socket in the home (mode 0600) that
/// speaks newline-delimited JSON. Each request is one object with an `id` and an `op`;
/// the answer is one final line `{"id":…,"ok":true,"result":…}` or
/// `{"id":…,"ok":false,"error":"…","category":"usage|state|data|failure"}`, possibly
/// preceded by progress lines `{"id":…,"event":{…}}`. The `events` op streams every node
/// event until the client disconnects.
///
/// Ops: status, peers, invitations, pair {address, context?}, accept {invitation},
/// decline {invitation}, msg {peer, text}, disconnect {peer}, unpair {peer}, browse,
/// visibility {visible?}, events. `pair`'s address may also be a discovered peer's name
/// or device ID (prefix).
public final class ControlServer: @unchecked Sendable {
    // @unchecked: `listener` is set once in start() before any other thread sees self;
    // everything else is immutable.
    let node: Node
    public let path: String
    private var listener: UnixListener?

    public init(node: Node, path: String) {
        self.node = node
        self.path = path
    }

    public func start() throws(EngineError) {
        let listener: UnixListener
        do { listener = try UnixListener(path: path) } catch {
            throw .network("cannot open the control socket: \(error.description)")
        }
        self.listener = listener
        let thread = Thread { [self] in
            while let connection = try? listener.accept() {
                let client = Thread { [self] in serve(connection) }
                client.name = "syncpeer-control-client"
                client.start()
            }
        }
        thread.name = "syncpeer-control"
        thread.start()
    }

    public func stop() {
        listener?.close()
    }

    private func serve(_ connection: UnixConnection) {
        connection.setSendTimeout(node.config.sendTimeout)
        let outbox = Outbox(connection)
        var reader = LineReader(connection)
        var subscription: UInt64?
        defer {
            if let subscription { node.unsubscribe(subscription) }
            outbox.finish()
        }
        while let line = try? reader.readLine() {
            let reply = Replier(outbox: outbox)
            let parsed = JSONValue.parse(line)
            guard let request = parsed, let op = request["op"]?.stringValue else {
                reply.failure(parsed?["id"], .invalidArgument("a request must be a JSON object with an \"op\""))
                continue
            }
            let id = request["id"]
            if op == "events" {
                if subscription == nil {
                    subscription = node.subscribe { event in reply.event(id, event) }
                }
                reply.success(id, "subscribed")
                continue
            }
            handle(op, request, id: id, reply: reply)
        }
    }

    private func handle(_ op: String, _ request: JSONValue, id: JSONValue?, reply: Replier) {
        func argument(_ name: String) throws(EngineError) -> String {
            guard let value = request[name]?.stringValue else { throw .invalidArgument("'\(op)' needs \"\(name)\"") }
            return value
        }
        do throws(EngineError) {
            switch op {
            case "status":
                reply.success(id, node.status())
            case "peers":
                reply.success(id, .array(node.peers()))
            case "invitations":
                reply.success(id, .array(node.invitations()))
            case "browse":
                reply.success(id, .array(try node.browse()))
            case "visibility":
                var visible: Bool?
                if let value = request["visible"] {
                    guard let flag = value.boolValue else { throw .invalidArgument("'visibility' takes \"visible\": true or false") }
                    visible = flag
                }
                reply.success(id, try node.setVisibility(visible))
            case "accept", "decline":
                if let folder = request["folder"]?.stringValue {
                    reply.success(id, try node.answerShare(folder, accept: op == "accept", into: request["dir"]?.stringValue))
                    return
                }
                if let transfer = request["transfer"]?.stringValue {
                    try followTransfer(id: id, reply: reply, follow: request["follow"]?.boolValue == true) { observer, completion throws(EngineError) in
                        let event = try node.answerOffer(transfer, accept: op == "accept", directory: request["dir"]?.stringValue,
                                                         observer: observer, completion: completion)
                        return event
                    }
                    return
                }
                let peer = try node.answer(invitation: try argument("invitation"), accept: op == "accept")
                reply.success(id, ["peer": ["id": .string(peer.id), "name": .string(peer.name)]])
            case "send":
                let path = try argument("path")
                let peer = try argument("peer")
                try node.ensureConnected(peer)
                try followTransfer(id: id, reply: reply, follow: true) { observer, completion throws(EngineError) in
                    node.send(path: path, to: peer, name: request["name"]?.stringValue, spoolFile: request["spool"]?.stringValue,
                              observer: observer ?? { _ in }, completion: completion ?? { _ in })
                    return nil
                }
            case "receive":
                try followTransfer(id: id, reply: reply, follow: true) { observer, completion throws(EngineError) in
                    node.receiveNext(directory: request["dir"]?.stringValue, accept: request["decline"]?.boolValue != true,
                                     observer: observer ?? { _ in }, completion: completion ?? { _ in })
                    return nil
                }
            case "share":
                let peers = (request["peers"]?.arrayValue ?? []).compactMap(\.stringValue)
                guard !peers.isEmpty else { throw .invalidArgument("'share' needs at least one peer") }
                reply.success(id, try node.share(directory: try argument("dir"), with: peers))
            case "unshare":
                reply.success(id, try node.unshare(directory: try argument("dir")))
            case "confirm":
                reply.success(id, try node.confirmFolder(directory: try argument("dir")))
            case "folders":
                reply.success(id, ["folders": .array(node.folderStatus()), "offers": .array(node.shareOffers())])
            case "conflicts":
                reply.success(id, .array(node.conflicts()))
            case "resolve":
                reply.success(id, try node.resolveConflict(path: try argument("path"), keep: try argument("keep")))
            case "transfers":
                reply.success(id, .array(node.transferList()))
            case "cancel":
                reply.success(id, try node.cancelTransfer(try argument("transfer")).json)
            case "resume":
                reply.success(id, ["offered": JSONValue(node.resumeTransfers(request["transfer"]?.stringValue))])
            case "msg":
                let (peer, messageID) = try node.sendMessage(to: try argument("peer"), text: try argument("text"))
                reply.success(id, ["peer": ["id": .string(peer.id), "name": .string(peer.name)], "id": JSONValue(messageID)])
            case "disconnect":
                let peer = try node.disconnect(peer: try argument("peer"))
                reply.success(id, ["peer": ["id": .string(peer.id), "name": .string(peer.name)]])
            case "auto-accept":
                let on = request["on"]?.boolValue ?? true
                let peer = try node.setAutoAccept(peer: try argument("peer"), on)
                reply.success(id, ["peer": ["id": .string(peer.id), "name": .string(peer.name)], "autoAccept": .bool(on)])
            case "unpair":
                let peer = try node.unpair(peer: try argument("peer"))
                reply.success(id, ["peer": ["id": .string(peer.id), "name": .string(peer.name)]])
            case "pair":
                let done = DispatchSemaphore(value: 0)
                node.pair(address: try argument("address"), context: request["context"]?.stringValue,
                          progress: { event in reply.event(id, event) },
                          completion: { result in
                              switch result {
                              case let .success(peer):
                                  reply.success(id, ["peer": ["id": .string(peer.id), "name": .string(peer.name)]])
                              case let .failure(error):
                                  reply.failure(id, error)
                              }
                              done.signal()
                          })
                done.wait()
            default:
                throw .invalidArgument("unknown op '\(op)'")
            }
        } catch {
            reply.failure(id, error)
        }
    }

    /// Runs a transfer request; with `follow`, streams its progress to the client and answers
    /// when it ends, else answers at once with `start`'s event.
    private func followTransfer(id: JSONValue?, reply: Replier, follow: Bool,
                                _ start: (_ observer: (@Sendable (NodeEvent) -> Void)?,
                                          _ completion: (@Sendable (Result<NodeEvent, EngineError>) -> Void)?) throws(EngineError) -> NodeEvent?) throws(EngineError) {
        guard follow else {
            if let event = try start(nil, nil) { reply.success(id, event.json) }
            return
        }
        let done = DispatchSemaphore(value: 0)
        let first = try start({ event in reply.event(id, event) }, { result in
            switch result {
            case let .success(event): reply.success(id, event.json)
            case let .failure(error): reply.failure(id, error)
            }
            done.signal()
        })
        if let first { reply.event(id, first) }
        done.wait()
    }

    /// Writes answer lines to one client, through its outbox (never blocks the caller,
    /// which may be the node's queue emitting an event).
    struct Replier: Sendable {
        let outbox: Outbox

        func success(_ id: JSONValue?, _ result: JSONValue) {
            write(["id": id ?? .null, "ok": true, "result": result])
        }

        func failure(_ id: JSONValue?, _ error: EngineError) {
            write(["id": id ?? .null, "ok": false, "error": .string(error.description),
                   "kind": .string(error.kind.rawValue), "category": .string(error.category.rawValue)])
        }

        func event(_ id: JSONValue?, _ event: NodeEvent) {
            write(["id": id ?? .null, "event": event.json])
        }

        private func write(_ value: JSONValue) {
            outbox.write(Array((value.encodedLine() + "\n").utf8))
        }
    }

    /// The lines waiting for one client, written in order on the client's own queue. A
    /// client that stops reading (an `events` reader that hangs) never stalls the node: at
    /// most `maxPendingBytes` wait for it, beyond that it is disconnected, and a write that
    /// cannot proceed for the send timeout fails and disconnects it too.
    final class Outbox: Sendable {
        static let maxPendingBytes = 4 << 20
        private let connection: UnixConnection
        private let queue = DispatchQueue(label: "syncpeer.control.client")
        private let state = Mutex((pending: 0, closed: false))

        init(_ connection: UnixConnection) {
            self.connection = connection
        }

        func write(_ line: [UInt8]) {
            let accepted = state.withLock { state -> Bool in
                guard !state.closed else { return false }
                guard state.pending + line.count <= Self.maxPendingBytes else {
                    state.closed = true
                    return false
                }
                state.pending += line.count
                return true
            }
            guard accepted else {
                // Overflow (or already closed): end the client; its request loop ends too.
                connection.close()
                return
            }
            queue.async { [self] in
                let failed = (try? connection.write(line)) == nil
                state.withLock { state in
                    state.pending -= line.count
                    if failed { state.closed = true }
                }
                if failed { connection.close() }
            }
        }

        /// Writes what is queued (bounded by the send timeout), then closes the connection.
        func finish() {
            queue.sync {}
            connection.close()
        }
    }
}
