internal import Dispatch
internal import FoundationEssentials
internal import Glibc
internal import PeerNet
internal import Synchronization

/// The node's local control socket: a Unix-domain socket in the home (mode 0600) that
/// speaks newline-delimited JSON. Each request is one object with an `id` and an `op` (read
/// as a `ControlRequest`); the answer is one final line `{"id":…,"ok":true,"result":…}` (a
/// typed result, see Results.swift and docs/JSON.md) or
/// `{"id":…,"ok":false,"error":"…","kind":"notFound",…,"category":"usage|state|data|failure"}`,
/// possibly preceded by progress lines `{"id":…,"event":{…}}`. A transfer result is its
/// `transfer` event (with `"event":"transfer"`), like the progress lines before it. The `events` op streams
/// every node event until the client disconnects. docs/PROTOCOL.md lists every op.
package final class ControlServer: Sendable {
    let node: Node
    package let path: String
    /// Set by start(), closed by stop() (from any thread).
    private let listener = Mutex<UnixListener?>(nil)

    package init(node: Node, path: String) {
        self.node = node
        self.path = path
    }

    package func start() throws(EngineError) {
        let listener: UnixListener
        do { listener = try UnixListener(path: path) } catch {
            throw .connection("cannot open the control socket", error)
        }
        self.listener.withLock { $0 = listener }
        OSThread.start(name: "syncpeer-control") { [self] in
            while let connection = try? listener.accept() {
                OSThread.start(name: "syncpeer-control-client") { [self] in serve(connection) }
            }
        }
    }

    package func stop() {
        listener.withLock { $0?.close() }
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
            let id = parsed?["id"]
            let request: ControlRequest
            do throws(EngineError) { request = try ControlRequest(json: parsed ?? .null) } catch {
                reply.failure(id, error)
                continue
            }
            // Which page of a list (`limit`, `after`); other requests carry none.
            var page = PageRequest()
            do throws(EngineError) { if request.isPaged { page = try PageRequest(json: parsed ?? .null) } } catch {
                reply.failure(id, error)
                continue
            }
            if request == .events {
                if subscription == nil {
                    subscription = node.subscribe { event in reply.event(id, event) }
                }
                reply.success(id, "subscribed")
                continue
            }
            handle(request, page: page, id: id, reply: reply, connection: connection)
        }
    }

    private func handle(_ request: ControlRequest, page: PageRequest, id: JSONValue?, reply: Replier, connection: UnixConnection) {
        do throws(EngineError) {
            switch request {
            case .events:
                break  // answered by the loop
            case .activity:
                reply.page(id, node.activity.page(page))
            case .status:
                reply.success(id, node.status())
            case .peers:
                reply.page(id, page.page(try node.peers(), key: \.pageKey) { $0 })
            case .invitations:
                reply.page(id, page.page(node.invitations(), key: \.invitation) { $0 })
            case .browse:
                reply.page(id, page.page(try node.browse(), key: \.pageKey) { $0 })
            case let .receiveDir(directory):
                reply.success(id, try node.setReceiveDirectory(directory))
            case let .rename(name):
                reply.success(id, try node.rename(to: name))
            case let .visibility(visible):
                reply.success(id, try node.setVisibility(visible))
            case let .answerShare(folder, accept, directory):
                reply.success(id, try node.answerShare(folder, accept: accept, into: directory))
            case let .answerOffer(transfer, accept, directory, follow):
                try followTransfer(id: id, reply: reply, follow: follow) { observer, completion throws(EngineError) in
                    try node.answerOffer(transfer, accept: accept, directory: directory, observer: observer, completion: completion)
                }
            case let .answerInvitation(invitation, accept):
                reply.success(id, PeerResult(peer: try node.answer(invitation: invitation, accept: accept)))
            case let .send(path, peer, name, spool, detach):
                try node.dialIfOffline(peer)
                if detach {
                    try detachedSend(id: id, reply: reply) { observer, completion in
                        node.send(path: path, to: peer, name: name, spoolFile: spool, observer: observer, completion: completion)
                    }
                    break
                }
                // The transfer is the client's: if it goes away before the end (Ctrl-C, a
                // closed terminal), the transfer is cancelled, never left to finish unseen.
                let cancellation = SendCancellation()
                let finished = Latch()
                OSThread.start(name: "syncpeer-control-send-watch") { [node] in
                    while !finished.isSet {
                        guard connection.peerHasHungUp(within: .milliseconds(250)) else { continue }
                        if finished.isSet { return }
                        if let transfer = cancellation.cancel() { _ = try? node.cancelTransfer(transfer) }
                        return
                    }
                }
                defer { finished.set() }
                // Set before the answer is written: a client that exits once it has read the
                // end (a failure that left the transfer paused, resumable) has not hung up on
                // a running send, and nothing is cancelled.
                try followTransfer(id: id, reply: reply, follow: true, beforeAnswer: { finished.set() }) { observer, completion throws(EngineError) in
                    node.send(path: path, to: peer, name: name, spoolFile: spool, cancellation: cancellation,
                              observer: observer ?? { _ in }, completion: completion ?? { _ in })
                    return nil
                }
            case let .receive(directory, accept):
                try followTransfer(id: id, reply: reply, follow: true) { observer, completion throws(EngineError) in
                    node.receiveNext(directory: directory, accept: accept,
                                     observer: observer ?? { _ in }, completion: completion ?? { _ in })
                    return nil
                }
            case let .share(directory, peers, role, noDeletes, only):
                reply.success(id, try node.share(directory: directory, with: peers, role: role, noDeletes: noDeletes, only: only))
            case let .acceptSelected(folder, directory, only):
                reply.success(id, try node.answerShare(folder, accept: true, into: directory, only: only))
            case let .select(directory, paths):
                reply.success(id, try node.select(directory: directory, paths: paths))
            case let .tree(directory, path):
                reply.page(id, try node.tree(directory: directory, path: path, page: page))
            case let .unshare(directory):
                reply.success(id, try node.unshare(directory: directory))
            case let .role(directory, peer, role, noDeletes):
                reply.success(id, try node.setRole(directory: directory, peer: peer, role: role, noDeletes: noDeletes))
            case let .roleChanges(directory):
                reply.page(id, try node.roleChanges(directory: directory, page: page))
            case let .override(directory):
                reply.success(id, try node.overrideFolder(directory: directory))
            case let .revert(directory):
                reply.success(id, try node.revertFolder(directory: directory))
            case let .guardLimits(directory, percent, files):
                reply.success(id, try node.guardLimits(directory: directory, percent: percent, files: files))
            case let .confirm(directory):
                reply.success(id, try node.confirmFolder(directory: directory))
            case let .verify(directory):
                reply.success(id, try node.verifyFolder(directory: directory))
            case let .rescan(directory, path):
                reply.success(id, try node.rescanFolder(directory: directory, path: path))
            case let .pauseFolder(directory, paused):
                reply.success(id, try node.setFolderPaused(directory: directory, paused))
            case let .ignores(directory, patterns):
                reply.success(id, try node.ignorePatterns(directory: directory, replacingWith: patterns))
            case .folders:
                let folders = try node.folderStatus(page)
                // The first offers come with the first page (what `status` shows at a glance).
                let offers = page.after == nil ? try node.shareOffers(PageRequest(limit: FoldersResult.firstOffers))
                                               : ListPage(items: [], next: nil)
                reply.success(id, FoldersResult(folders: folders.items, offers: offers.items, offersNext: offers.next),
                              next: folders.next)
            case .offers:
                reply.page(id, try node.shareOffers(page))
            case .conflicts:
                reply.page(id, try node.conflicts(page))
            case let .resolve(path, keep):
                reply.success(id, try node.resolveConflict(path: path, keep: keep))
            case let .history(path):
                reply.success(id, try node.history(path: path))
            case let .restore(path, at, version, to):
                reply.success(id, try node.restore(path: path, at: at, version: version, to: to,
                                                   progress: { reply.event(id, .transfer($0)) }))
            case let .versions(directory, policy):
                reply.success(id, try node.versionsPolicy(directory: directory, policy: policy))
            case .transfers:
                reply.page(id, try node.transferList(page).map(NodeEvent.transfer))
            case let .cancel(transfer):
                reply.success(id, NodeEvent.transfer(try node.cancelTransfer(transfer)))
            case let .resume(transfer):
                reply.success(id, try node.resumeTransfers(transfer))
            case let .message(peer, text):
                let (to, messageID) = try node.sendMessage(to: peer, text: text)
                reply.success(id, PeerResult(peer: to, id: messageID))
            case let .disconnect(peer):
                reply.success(id, PeerResult(peer: try node.disconnect(peer: peer)))
            case let .connect(peer):
                reply.success(id, PeerResult(peer: try node.connect(peer: peer)))
            case let .autoAccept(peer, on, folders):
                let ref = try node.setAutoAccept(peer: peer, on, folders: folders)
                reply.success(id, folders ? PeerResult(peer: ref, autoAcceptFolders: on) : PeerResult(peer: ref, autoAccept: on))
            case let .unpair(peer):
                reply.success(id, PeerResult(peer: try node.unpair(peer: peer)))
            case let .pairKey(key, name, addresses):
                reply.success(id, PeerResult(peer: try node.pair(key: key, name: name, addresses: addresses)))
            case let .streamSend(peer, name):
                let input = try passedDescriptor(connection, request)
                defer { close(input) }
                try node.ensureConnected(peer)
                let stream = try node.openStream(named: name, to: peer)
                // Progress as `transfer` events without an ID (a stream has none), so `send -`
                // shows its line at once.
                let progress = { (bytes: Int64) in
                    reply.event(id, .transfer(TransferInfo(transfer: nil, direction: .send, peer: stream.peer, name: stream.name,
                                                           state: .active, bytes: bytes,
                                                           time: Int64(Date().timeIntervalSince1970 * 1000))))
                }
                reply.success(id, try StreamPump.send(from: input, to: stream, clientGone: { connection.peerHungUp },
                                                      progress: progress))
            case let .streamReceive(peer):
                let output = try passedDescriptor(connection, request)
                defer { close(output) }
                var stream: IncomingByteStream?
                while stream == nil {
                    // Wait in steps, so a client that gave up is noticed.
                    if connection.peerHungUp { throw EngineError.network("the client went away") }
                    stream = try node.acceptStream(from: peer, timeout: .seconds(1))
                }
                reply.success(id, try StreamPump.receive(stream!, to: output, clientGone: { connection.peerHungUp }))
            case let .pair(address, context):
                let done = DispatchSemaphore(value: 0)
                node.pair(address: address, context: context,
                          progress: { event in reply.event(id, event) },
                          completion: { result in
                              switch result {
                              case let .success(peer): reply.success(id, PeerResult(peer: peer))
                              case let .failure(error): reply.failure(id, error)
                              }
                              done.signal()
                          })
                done.wait()
            }
        } catch {
            reply.failure(id, error)
        }
    }

    private func passedDescriptor(_ connection: UnixConnection, _ request: ControlRequest) throws(EngineError) -> Int32 {
        guard let fd = connection.takeDescriptor() else {
            throw .invalidArgument("'\(request.op.rawValue)' needs a descriptor passed with the request (SCM_RIGHTS)")
        }
        return fd
    }

    /// Runs a transfer request; with `follow`, streams its progress to the client and answers
    /// when it ends (`beforeAnswer` first), else answers at once with `start`'s event.
    private func followTransfer(id: JSONValue?, reply: Replier, follow: Bool, beforeAnswer: @escaping @Sendable () -> Void = {},
                                _ start: (_ observer: (@Sendable (NodeEvent) -> Void)?,
                                          _ completion: (@Sendable (Result<TransferInfo, EngineError>) -> Void)?) throws(EngineError) -> TransferInfo?) throws(EngineError) {
        guard follow else {
            if let event = try start(nil, nil) { reply.success(id, NodeEvent.transfer(event)) }
            return
        }
        let done = DispatchSemaphore(value: 0)
        let first = try start({ event in reply.event(id, event) }, { result in
            beforeAnswer()
            switch result {
            case let .success(event): reply.success(id, NodeEvent.transfer(event))
            case let .failure(error): reply.failure(id, error)
            }
            done.signal()
        })
        if let first { reply.event(id, .transfer(first)) }
        done.wait()
    }

    /// A send the daemon carries on alone: answers with the first transfer event that has
    /// an ID (or the error, if it fails before), then lets the transfer run.
    private func detachedSend(id: JSONValue?, reply: Replier,
                              _ start: (@escaping @Sendable (NodeEvent) -> Void,
                                        @escaping @Sendable (Result<TransferInfo, EngineError>) -> Void) -> Void) throws(EngineError) {
        let answered = Latch()
        let done = DispatchSemaphore(value: 0)
        @Sendable func answerOnce(_ body: () -> Void) {
            guard answered.set() else { return }
            body()
            done.signal()
        }
        start({ event in
            guard case let .transfer(info) = event, info.transfer != nil else {
                if case .transfer = event { reply.event(id, event) }
                return
            }
            answerOnce { reply.success(id, event) }
        }, { result in
            answerOnce {
                switch result {
                case let .success(event): reply.success(id, NodeEvent.transfer(event))
                case let .failure(error): reply.failure(id, error)
                }
            }
        })
        done.wait()
    }

    /// Writes answer lines to one client, through its outbox (never blocks the caller,
    /// which may be the node's queue emitting an event).
    struct Replier: Sendable {
        let outbox: Outbox

        /// The answer; `next` (a list's) says where the next page starts.
        func success(_ id: JSONValue?, _ result: some Encodable, next: String? = nil) {
            var answer: [String: JSONValue] = ["id": id ?? .null, "ok": true, "result": JSONValue(encoding: result)]
            if let next { answer["next"] = .string(next) }
            write(.object(answer))
        }

        /// One page of a list: its items as the result, and `next` while more follow.
        func page(_ id: JSONValue?, _ page: ListPage<some Encodable>) {
            success(id, page.items, next: page.next)
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
