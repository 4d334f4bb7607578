internal import FoundationEssentials
internal import Glibc
internal import PeerNet
package import SyncEngine
internal import Synchronization

/// The local web dashboard (`daemon --gui`): serves the embedded page, answers `POST /api`
/// with the control protocol's own requests and answers (it is a client of the daemon's
/// control socket, like the CLI), and streams the node's events to each open page over
/// Server-Sent Events. See docs/PROTOCOL.md ("Dashboard").
///
/// Everything a browser sends is hostile until checked: the parser is bounded
/// (`HTTPLimits`), a request has 5 s to arrive, `maxReading` arrive at once (the slowest is
/// pushed out for a newcomer), `maxServing` with a session are answered at once, and
/// `maxStreams` event streams are open (`ConnectionSlots`); only the embedded assets are
/// served (no path reaches the disk); Host and Origin must name this server; the session's
/// cookie is needed for everything but the login; POST needs the CSRF token too.
package final class DashboardServer: Sendable {
    /// "host:port" the server listens on.
    package let address: String
    let listener: TCPListener
    let access: DashboardAccess
    let home: NodeHome
    let log: @Sendable (String) -> Void
    private let slots = ConnectionSlots(readers: DashboardServer.maxReading, servers: DashboardServer.maxServing)
    private let streams = Mutex<[ObjectIdentifier: EventStream]>([:])
    /// Uploads arriving now (at most `maxUploads` take the larger body limit).
    private let uploads = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)

    /// Requests arriving at once (the slowest sender's is closed for a newcomer beyond) and
    /// requests with a session answered at once (`ConnectionSlots`).
    static let maxReading = 32
    static let maxServing = 32
    static let maxStreams = 64
    /// Time for a whole request to arrive (a slow sender holds a slot no longer).
    static let requestTimeout: Duration = .seconds(5)
    static let sendTimeout: Duration = .seconds(10)
    static let heartbeat: Duration = .seconds(15)

    /// The ops a page may send: what the views show, the answers they give and the settings
    /// they change. `send` and the folder ops (`share`, `unshare`, `rescan`, `ignores`,
    /// `pause`, `resume-folder`) name a path on this machine, typed in full
    /// (the daemon checks it as for the CLI); a send runs detached. `history` and `restore`
    /// (versions, "recently deleted") name a path inside a shared folder; `confirm` applies a
    /// held mass change and `role` sets a member's role (a folder typed in full, as the others).
    /// Not the descriptor ops, `receive` (it waits), `verify`, nor `unpair` (the CLI asks first).
    static let allowedOps: Set<ControlRequest.Op> = [
        .status, .peers, .invitations, .browse, .visibility, .pair, .accept, .decline, .transfers, .cancel,
        .resume, .folders, .offers, .conflicts, .resolve, .connect, .disconnect, .msg,
        .share, .unshare, .send, .autoAccept, .activity, .rescan, .ignores, .pause, .resumeFolder, .rename, .receiveDir,
        .select, .tree,
        .history, .restore,
        .role, .changes, .override, .revert,
        .confirm,
    ]

    /// The file `syncpeer gui` reads the running dashboard's address from. Written when the
    /// server starts, removed when it stops and when a daemon starts (`forgetAddress`), so it
    /// never names the port of a daemon that is gone.
    package static func addressFile(_ home: NodeHome) -> String { home.path + "/gui-address" }

    package static func forgetAddress(_ home: NodeHome) {
        unlink(addressFile(home))
    }

    /// Listens on `listen` ("host:port"); a non-loopback address only with `allowRemote`.
    package static func start(home: NodeHome, listen: String, allowRemote: Bool,
                             log: @escaping @Sendable (String) -> Void) throws(EngineError) -> DashboardServer {
        let requested: HostPort
        do { requested = try HostPort(parsing: listen) } catch { throw .invalidArgument("--gui: \(error.description)") }
        guard requested.host != "0.0.0.0", requested.host != "::", requested.host != "localhost" else {
            throw .invalidArgument("--gui \(listen): name one numeric address (127.0.0.1, or this machine's address on a network with --gui-allow-remote); requests must name it in their Host")
        }
        let loopback = requested.host == "127.0.0.1" || requested.host == "::1"
        guard loopback || allowRemote else {
            throw .invalidArgument("--gui \(listen) is not a loopback address: anyone who can reach it could try the dashboard; add --gui-allow-remote to mean it")
        }
        let token = try DashboardAccess.loadOrCreateToken(home: home)
        let usedCodes = try UsedLoginCodes.load(home: home)
        let listener: TCPListener
        do { listener = try TCPListener(host: requested.host, port: requested.port) } catch {
            throw .connection("cannot serve the dashboard on \(listen)", error)
        }
        let access = DashboardAccess(key: token, port: listener.port, hosts: DashboardAccess.hostNames(host: requested.host, port: listener.port),
                                     usedCodes: usedCodes)
        let server = DashboardServer(listener: listener, home: home, log: log, access: access)
        if !loopback {
            log("dashboard: listening on \(server.address), beyond this machine (--gui-allow-remote): plain HTTP, so the session cookie crosses the network readable; prefer an SSH tunnel to 127.0.0.1")
        }
        do {
            try Data((server.url + "\n").utf8).write(to: URL(fileURLWithPath: addressFile(home)), options: .atomic)
        } catch {
            listener.close()
            throw .invalidArgument("cannot write \(addressFile(home)): \(Self.reason(error))")
        }
        OSThread.start(name: "syncpeer-gui-accept") { server.acceptLoop() }
        OSThread.start(name: "syncpeer-gui-heartbeat") { server.heartbeatLoop() }
        return server
    }

    private init(listener: TCPListener, home: NodeHome, log: @escaping @Sendable (String) -> Void, access: DashboardAccess) {
        self.listener = listener
        self.home = home
        self.log = log
        self.access = access
        let host = listener.host.contains(":") ? "[\(listener.host)]" : listener.host
        address = "\(host):\(listener.port)"
    }

    /// The dashboard's URL without the key.
    package var url: String { "http://\(address)/" }

    /// Stops listening and ends every event stream.
    package func stop() {
        stopped.store(true, ordering: .relaxed)
        listener.close()
        for stream in streams.withLock({ Array($0.values) }) { stream.close() }
        try? FileManager.default.removeItem(atPath: Self.addressFile(home))
    }

    // MARK: Connections

    private func acceptLoop() {
        while !stopped.load(ordering: .relaxed) {
            let connection: TCPConnection
            do { connection = try listener.accept() } catch {
                if case .closed = error { return }
                continue
            }
            let ticket = slots.admit { connection.close() }
            OSThread.start(name: "syncpeer-gui-request") { [self] in serve(connection, ticket) }
        }
    }

    /// Reads one request (bounded in size and time), answers it, closes the connection.
    /// It holds a reading slot until it has arrived, then a serving slot if it has a session
    /// (`ConnectionSlots`); an event stream gives its slot back and counts among
    /// `maxStreams` instead.
    private func serve(_ connection: TCPConnection, _ ticket: ConnectionSlots.Ticket) {
        var reading = true
        defer { if reading { slots.leaveReading(ticket) } }
        connection.setSendTimeout(Self.sendTimeout)
        let deadline = ContinuousClock.now + Self.requestTimeout
        var limits = HTTPLimits()
        var uploading = false
        defer { if uploading { uploads.subtract(1, ordering: .relaxed) } }
        var buffer: [UInt8] = []
        var request: HTTPRequest?
        // The head's end is looked for in the new bytes only, and the request is parsed once
        // the head is there and again only when the whole body is: a client that sends one
        // byte at a time costs a scan of each byte once, not of the whole buffer each time.
        var headComplete = false
        var needed = 0
        reading: while true {
            if headComplete && buffer.count >= needed {
                switch HTTPRequestParser.parse(buffer, limits: limits) {
                case let .request(parsed, _):
                    request = parsed
                    break reading
                case let .invalid(status, reason):
                    respond(connection, HTTPResponse.text(status, reason))
                    connection.close()
                    return
                case let .bodyPending(total):
                    needed = total
                case .incomplete:
                    needed = buffer.count + 1
                }
            }
            guard let more = try? connection.read(maxCount: 16_384, deadline: deadline), !more.isEmpty else {
                connection.close()
                return
            }
            let scanFrom = max(0, buffer.count - 3)
            buffer += more
            if !headComplete {
                headComplete = HTTPRequestParser.endOfHead(buffer, from: scanFrom, within: limits.head) != nil
                    || buffer.count > limits.head  // the parser says which limit it passed
                needed = 0
                if headComplete, Self.startsUpload(buffer) {
                    uploading = uploads.add(1, ordering: .relaxed).newValue <= Self.maxUploads
                    if uploading { limits.body = Self.maxUploadBytes } else { uploads.subtract(1, ordering: .relaxed) }
                }
            }
        }
        guard let request else { return }
        guard access.hasSession(request) else {
            _ = route(request, on: connection)  // a refusal or a login: never a stream
            connection.close()
            return
        }
        reading = false
        guard slots.startServing(ticket) else {
            respond(connection, .text(503, "\(Self.maxServing) requests are being served; try again"))
            connection.close()
            return
        }
        let stream = route(request, on: connection)
        slots.finishServing()
        if let stream { runStream(stream) }
        connection.close()
    }

    private func respond(_ connection: TCPConnection, _ response: HTTPResponse) {
        try? connection.write(response.bytes())
    }

    /// Answers `request`, or returns the event stream it opened.
    private func route(_ request: HTTPRequest, on connection: TCPConnection) -> EventStream? {
        guard access.hostAllowed(request) else {
            respond(connection, .text(421, "this server answers only to \(address)"))
            return nil
        }
        if request.method == "POST" && request.path == "/login" {
            respond(connection, login(request))
            return nil
        }
        let changes = request.method == "POST"
        guard access.originAllowed(request, required: changes) else {
            respond(connection, .text(403, "requests from another origin are refused"))
            return nil
        }
        switch (request.method, request.path) {
        case ("GET", "/") where request.query["login"] != nil:
            guard access.redeem(request.query["login"]) else {
                respond(connection, .page(401, Self.loginPage("This link was used already or is older than two minutes: run 'syncpeer gui' for a new one.")))
                return nil
            }
            // The code leaves the address bar at once; the session cookie holds the login.
            respond(connection, HTTPResponse(status: 303, headers: [("Location", "/"), ("Set-Cookie", access.openSession())], body: []))
            return nil
        case ("GET", _), ("POST", _):
            break
        case ("HEAD", _):
            respond(connection, .text(405, "HEAD is not served"))
            return nil
        default:
            respond(connection, .text(405, "only GET and POST are served"))
            return nil
        }
        guard access.hasSession(request) else {
            respond(connection, .page(401, Self.loginPage("Run 'syncpeer gui' to log in.")))
            return nil
        }
        switch (request.method, request.path) {
        case ("GET", "/"):
            let page = DashboardAssets.indexHTML.replacing("{{CSRF}}", with: access.csrf)
            respond(connection, .asset(page, type: "text/html; charset=utf-8"))
        case ("GET", "/app.js"):
            respond(connection, .asset(DashboardAssets.appJS, type: "text/javascript; charset=utf-8"))
        case ("GET", "/style.css"):
            respond(connection, .asset(DashboardAssets.styleCSS, type: "text/css; charset=utf-8"))
        case ("GET", "/events"):
            guard let stream = openStream(connection) else {
                respond(connection, .text(503, "\(Self.maxStreams) dashboard pages are open already"))
                return nil
            }
            return stream
        case ("POST", "/api"):
            guard access.hasCSRF(request) else {
                respond(connection, .text(403, "the CSRF token is missing or wrong: reload the page"))
                return nil
            }
            guard request.header("content-type")?.lowercased().hasPrefix("application/json") == true else {
                respond(connection, .text(415, "the body must be application/json"))
                return nil
            }
            respond(connection, .json(call(request.body)))
        case ("POST", "/upload"):
            guard access.hasCSRF(request) else {
                respond(connection, .text(403, "the CSRF token is missing or wrong: reload the page"))
                return nil
            }
            respond(connection, .json(upload(request)))
        default:
            respond(connection, .text(404, "not found"))
        }
        return nil
    }

    // MARK: API

    /// One control request from the page, answered as the control socket answers it.
    func call(_ body: [UInt8]) -> JSONValue {
        let parsed: ControlRequest
        do throws(EngineError) {
            guard let json = JSONValue.parse(String(decoding: body, as: UTF8.self)), case .object = json else {
                throw .invalidArgument("the body is not a JSON object")
            }
            parsed = try ControlRequest(json: json)
            try Self.check(parsed)
            let client = try ControlClient.connect(home: home)
            // A list is answered a page at a time, as on the control socket (`limit`, `after`, `next`).
            guard parsed.isPaged else { return ["ok": true, "result": try client.request(parsed)] }
            return try client.page(parsed, PageRequest(json: json))
        } catch {
            return ["ok": false, "error": .string(error.description), "kind": .string(error.kind.rawValue)]
        }
    }

    /// Refuses what a page may not ask: ops outside `allowedOps`, and answers that would
    /// choose a directory on this machine or hold the request open for a whole transfer.
    static func check(_ request: ControlRequest) throws(EngineError) {
        guard allowedOps.contains(request.op) else {
            throw .invalidArgument("the dashboard does not take '\(request.op.rawValue)'; use the syncpeer command")
        }
        switch request {
        case let .answerOffer(_, _, directory, follow) where directory != nil || follow:
            throw .invalidArgument("the dashboard accepts files into the receive directory only")
        case let .answerShare(_, _, directory) where directory != nil, let .acceptSelected(_, directory, _) where directory != nil:
            throw .invalidArgument("the dashboard accepts folders into the receive directory only")
        case let .send(path, _, _, spool, detach):
            guard detach, spool == nil else { throw .invalidArgument("the dashboard sends detached, from a path only") }
            try fullPath(path)
        case let .share(directory, _, _, _, _), let .unshare(directory), let .rescan(directory, _), let .ignores(directory, _),
             let .pauseFolder(directory, _), let .receiveDir(directory), let .role(directory, _, _, _), let .roleChanges(directory),
             let .override(directory), let .revert(directory), let .confirm(directory):
            try fullPath(directory)
        case let .select(directory, _), let .tree(directory, _):
            try fullPath(directory)
        default:
            return
        }
    }

    /// A path typed on the page names this machine's file system from its root: the daemon's
    /// own working directory means nothing to the person typing.
    private static func fullPath(_ path: String) throws(EngineError) {
        guard path.hasPrefix("/") else {
            throw .invalidArgument("'\(path)' is not a full path: type it from / (e.g. /home/you/Documents)")
        }
    }

    // MARK: Events

    private func openStream(_ connection: TCPConnection) -> EventStream? {
        let stream = EventStream(connection)
        let opened = streams.withLock { open -> Bool in
            guard open.count < Self.maxStreams, !stopped.load(ordering: .relaxed) else { return false }
            open[ObjectIdentifier(stream)] = stream
            return true
        }
        return opened ? stream : nil
    }

    /// Writes every node event to the page until either side goes away. The daemon bounds
    /// what waits for a control client (its outbox); a page that stops reading is cut off
    /// there, never stalling the node, and its EventSource reconnects and resyncs.
    private func runStream(_ stream: EventStream) {
        defer {
            streams.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(stream)) }
            stream.close()
        }
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n"
            + HTTPResponse.securityHeaders.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
        // Every stream starts with `resync`: a page that reconnects fetches everything again.
        guard stream.send(head + "retry: 2000\nevent: resync\ndata: {}\n\n") else { return }
        guard let client = try? ControlClient.connect(home: home) else { return }
        stream.attach(client)
        try? client.streamEvents { event in
            stream.send("data: \(event.json.encodedLine())\n\n")
        }
    }

    private func heartbeatLoop() {
        while !stopped.load(ordering: .relaxed) {
            OSThread.sleep(for: .seconds(Self.heartbeat.components.seconds))
            // A comment line: finds the pages that went away while no event came.
            for stream in streams.withLock({ Array($0.values) }) where !stream.send(": keepalive\n\n") {
                stream.close()
            }
        }
    }
}

/// One open event stream: writes are serialised (events and heartbeats), and the first
/// failure closes it and the control connection behind it. `close` never waits for a
/// write in progress (a page that reads a byte now and then could hold one for long): it
/// shuts the socket, which ends that write.
final class EventStream: Sendable {
    private let connection: TCPConnection
    private let writing = Mutex<Void>(())
    private let closed = Atomic<Bool>(false)
    private let client = Mutex<ControlClient?>(nil)

    init(_ connection: TCPConnection) { self.connection = connection }

    func attach(_ client: ControlClient) {
        self.client.withLock { $0 = client }
        if closed.load(ordering: .acquiring) { client.hangUp() }
    }

    @discardableResult
    func send(_ text: String) -> Bool {
        writing.withLock { _ -> Bool in
            guard !closed.load(ordering: .acquiring) else { return false }
            if (try? connection.write(Array(text.utf8))) == nil {
                close()
                return false
            }
            return true
        }
    }

    func close() {
        closed.store(true, ordering: .releasing)
        client.withLock { $0 }?.hangUp()
        connection.close()
    }
}

extension DashboardServer {
    /// A file error in words: the system's text for the errno under it ("Permission
    /// denied"), else the error as it describes itself.
    static func reason(_ error: any Error) -> String {
        if let file = error as? CocoaError, let posix = file.underlying as? POSIXError {
            return String(cString: strerror(posix.code.rawValue))
        }
        return "\(error)"
    }
}
