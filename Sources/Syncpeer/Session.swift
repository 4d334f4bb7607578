public import Foundation
internal import SyncEngine
internal import Synchronization

/// A running syncpeer node and its sessions with peers: Multipeer Connectivity's
/// `MCSession`, with its `MCPeerID` (`myPeerID`). It owns a home folder (identity key,
/// index) like the `syncpeer` CLI's, and serves the same control socket, so
/// `syncpeer --home HOME …` commands work beside a program that uses this API.
///
/// ```swift
/// let session = try Session(home: "/tmp/alice", configuration: Session.Configuration(displayName: "alice"))
/// for await event in session.events {
///     if case let .received(data, from) = event { print(from.displayName, data.count) }
/// }
/// ```
public final class Session: Sendable {
    /// Where the node is reached ("host:port").
    public let address: String
    /// This node.
    public let myPeerID: PeerID
    /// What the session was made with.
    public let configuration: Configuration
    let daemon: Daemon
    var node: Node { daemon.node }

    /// What happens in the session, as `events` delivers it.
    public enum Event: Sendable {
        /// A peer's state changed (`session(_:peer:didChange:)`).
        case stateChanged(PeerID, PeerState)
        /// A message (`session(_:didReceive:fromPeer:)`).
        case received(Data, from: PeerID)
        /// A peer offers a resource (file or folder); answer with `acceptResource`.
        case resourceOffered(ResourceOffer)
        /// A resource finished, either way (`didFinishReceivingResourceWithName`).
        case resourceFinished(name: String, peer: PeerID, state: ResourceState)
        /// A shared folder changed state (syncing, idle, a conflict).
        case folderChanged(folderID: String, state: FolderState)
        /// A peer shares a folder with us; answer with `acceptFolder`.
        case folderOffered(folderID: String, label: String, from: PeerID)
        /// The consumer fell behind by more than the stream holds: this many events after the
        /// previous one were left out (never silently). Read `folders`, `connectedPeers`
        /// again for the current state.
        case eventsDropped(Int)
    }

    /// A resource a peer offers (`didStartReceivingResourceWithName`).
    public struct ResourceOffer: Sendable {
        public let id: String
        public let name: String
        public let peer: PeerID
        public let totalBytes: Int64
        public let files: Int
    }

    /// Opens (creating it if needed, with `configuration.displayName`) the node in `home`
    /// and starts it as `configuration` says. Nothing comes from the environment.
    public init(home: String, configuration: Configuration) throws(SyncpeerError) {
        let nodeHome = NodeHome(path: home)
        if !FileManager.default.fileExists(atPath: nodeHome.keyFile) {
            do throws(EngineError) { _ = try NodeSetup.initialise(home: nodeHome, name: configuration.displayName) } catch {
                throw SyncpeerError(error)
            }
        }
        let config = configuration.nodeConfig
        do throws(EngineError) {
            try config.validateDiscovery()
            daemon = try Daemon.start(home: nodeHome, config: config) { _ in }
        } catch {
            throw SyncpeerError(error)
        }
        self.configuration = configuration
        address = daemon.listenAddress
        myPeerID = PeerID(PeerRef(id: daemon.node.identity.deviceID, name: daemon.node.identity.displayName))
    }

    /// A session with the defaults of `Configuration` but these.
    public convenience init(home: String, displayName: String, listen: String = "127.0.0.1:0",
                            receiveDirectory: String? = nil, discovery: Bool = false) throws(SyncpeerError) {
        var configuration = Session.Configuration(displayName: displayName)
        configuration.listen = listen
        configuration.receiveDirectory = receiveDirectory
        configuration.discovery = discovery
        try self.init(home: home, configuration: configuration)
    }

    /// Says goodbye to every peer and stops the node (`disconnect()`).
    public func close() {
        daemon.stop()
    }

    /// Peers with a connected session (`connectedPeers`).
    public var connectedPeers: [PeerID] {
        node.connectedPeers().map { PeerID($0) }
    }

    /// Every event from now on, until the consumer stops iterating; at most 4,096 wait for
    /// a consumer that falls behind, then `.eventsDropped(count)` says how many were left
    /// out. Each access is a new subscription.
    public var events: EventStream<Event> { events(bufferSize: 4096) }

    /// Every event from now on, with at most `bufferSize` waiting for the consumer.
    public func events(bufferSize: Int) -> EventStream<Event> {
        let node = self.node
        let buffer = EventBuffer<Event>(capacity: bufferSize) { .eventsDropped($0) }
        let token = node.subscribe { [weak buffer] event in
            if let mapped = Session.map(event) { buffer?.yield(mapped) }
        }
        let messages = node.subscribeMessages { [weak buffer] peer, body in
            buffer?.yield(.received(Data(body), from: PeerID(peer)))
        }
        buffer.whenTerminated {
            node.unsubscribe(token)
            node.unsubscribeMessages(messages)
        }
        return EventStream(buffer: buffer)
    }

    static func map(_ event: NodeEvent) -> Event? {
        switch event {
        case let .state(change):
            return .stateChanged(PeerID(change.peer), PeerState(change.state))
        case let .offer(offer):
            return .resourceOffered(ResourceOffer(id: offer.transfer, name: offer.name, peer: PeerID(offer.peer),
                                                  totalBytes: offer.total, files: offer.files))
        case let .transfer(info) where info.direction == .receive && info.state.isFinished:
            guard let peer = info.peer else { return nil }
            let state: ResourceState = switch info.state {
            case .completed: .completed(info.path.map(URL.init(fileURLWithPath:)))
            case .cancelled: .cancelled
            case .declined: .declined
            case .withdrawn: .withdrawn
            default: .failed(reason: info.reason ?? info.state.rawValue)
            }
            return .resourceFinished(name: info.name, peer: PeerID(peer), state: state)
        case let .shareOffer(offer):
            return .folderOffered(folderID: offer.folder, label: offer.name, from: PeerID(offer.peer))
        case let .folder(change):
            return .folderChanged(folderID: change.folder, state: FolderState(engine: change.state?.rawValue))
        default:
            return nil
        }
    }

    // MARK: Connecting

    /// Invites the node at `address` ("host:port", a discovered name or a device ID prefix)
    /// with `context` (`invitePeer(_:to:withContext:timeout:)`); returns the peer once it
    /// accepted. Both ends show the same 6-digit code meanwhile (`code`).
    ///
    /// Cancelling the calling task throws `.cancelled` at once; the dial or invitation
    /// already sent runs out by itself (the peer may still see it until it expires), and a
    /// later acceptance connects the session without this call.
    public func invite(_ address: String, context: String? = nil,
                       code: @escaping @Sendable (String) -> Void = { _ in }) async throws(SyncpeerError) -> PeerID {
        let answer = OneShot<PeerID>()
        node.pair(address: address, context: context, progress: { event in
            if case let .invitationPending(shown) = event { code(shown.code) }
        }, completion: { result in
            answer.resolve(result.map(PeerID.init).mapError(SyncpeerError.init))
        })
        return try await answer.value()
    }

    /// Ends the session with `peer` (it is not redialled until it connects again).
    public func disconnect(_ peer: PeerID) throws(SyncpeerError) {
        do throws(EngineError) { _ = try node.disconnect(peer: peer.deviceID) } catch { throw SyncpeerError(error) }
    }

    // MARK: Messages

    /// Sends `data` (at most 65,536 bytes) to each of `peers` (`send(_:toPeers:with:)`).
    /// Returns the peers it went to: with `.unreliable`, a peer whose link is saturated is
    /// left out (the message is dropped for it, never queued).
    @discardableResult
    public func send(_ data: Data, to peers: [PeerID], mode: SendMode = .reliable) throws(SyncpeerError) -> [PeerID] {
        var sent: [PeerID] = []
        for peer in peers {
            do throws(EngineError) {
                if try node.sendMessage(to: peer.deviceID, bytes: Array(data), unreliable: mode == .unreliable).sent {
                    sent.append(peer)
                }
            } catch { throw SyncpeerError(error) }
        }
        return sent
    }

    // MARK: Resources

    /// Sends the file or folder at `url` as `name` to `peer` (`sendResource(at:withName:toPeer:)`).
    /// The `Progress` is live (`completedUnitCount` counts bytes the peer verified),
    /// `cancel()` cancels the transfer on both ends, and `completion` runs once at the end.
    /// Sent again after an interruption, the same content continues where it stopped.
    @discardableResult
    public func sendResource(at url: URL, named name: String? = nil, to peer: PeerID,
                             completion: @escaping @Sendable (SyncpeerError?) -> Void = { _ in }) -> Progress {
        let progress = Progress(totalUnitCount: -1)
        progress.kind = .file
        progress.isCancellable = true
        progress.isPausable = false
        let transfer = Mutex<String?>(nil)
        let node = self.node
        progress.cancellationHandler = {
            if let id = transfer.withLock({ $0 }) { _ = try? node.cancelTransfer(id) }
        }
        node.send(path: url.standardizedFileURL.path, to: peer.deviceID, name: name, spoolFile: nil, observer: { event in
            guard case let .transfer(info) = event else { return }
            if let id = info.transfer {
                let first = transfer.withLock { current -> Bool in
                    defer { current = id }
                    return current == nil
                }
                if first && progress.isCancelled { _ = try? node.cancelTransfer(id) }
            }
            if let total = info.total { progress.totalUnitCount = total }
            // While preparing, `bytes` counts what was hashed, not what the peer has.
            if info.state != .preparing, let bytes = info.bytes { progress.completedUnitCount = bytes }
        }, completion: { result in
            switch result {
            case let .success(info):
                if let total = info.total { progress.totalUnitCount = total; progress.completedUnitCount = total }
                completion(nil)
            case let .failure(error):
                completion(SyncpeerError(error))
            }
        })
        return progress
    }

    /// Accepts (or declines) a resource a peer offered; accepted, it goes to `directory`
    /// (default: the receive directory).
    public func acceptResource(_ offer: ResourceOffer, into directory: String? = nil, accept: Bool = true) throws(SyncpeerError) {
        do throws(EngineError) {
            _ = try node.answerOffer(offer.id, accept: accept, directory: directory, observer: nil, completion: nil)
        } catch { throw SyncpeerError(error) }
    }

    // MARK: Streams

    /// Opens the byte stream `name` to `peer` (`startStream(withName:toPeer:)`).
    public func startStream(named name: String, to peer: PeerID) throws(SyncpeerError) -> OutputByteStream {
        do throws(EngineError) { return OutputByteStream(try node.openStream(named: name, to: peer.deviceID)) } catch {
            throw SyncpeerError(error)
        }
    }

    /// Takes the next stream a peer opens (from `peer` only, if given); nil after `timeout`.
    /// Waits without a thread of its own. Cancelling the calling task throws `.cancelled`
    /// promptly (unless a stream came first: then it is returned), and no stream is lost: one
    /// that comes later waits for the next `acceptStream`.
    public func acceptStream(from peer: PeerID? = nil, timeout: Duration? = nil) async throws(SyncpeerError) -> InputByteStream? {
        let node = self.node
        let answer = OneShot<IncomingByteStream?>()
        let waiter: UInt64
        do throws(EngineError) {
            waiter = try node.awaitStream(from: peer?.deviceID) { answer.resolve(.success($0)) }
        } catch {
            throw SyncpeerError(error)
        }
        /// Ends the wait with `outcome` unless a stream was delivered first.
        @Sendable func withdraw(_ outcome: Result<IncomingByteStream?, SyncpeerError>) {
            node.withdrawStreamWaiter(waiter) { waiting in if waiting { answer.resolve(outcome) } }
        }
        if let timeout {
            let (seconds, attoseconds) = timeout.components
            let nanoseconds = Int(clamping: seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue + attoseconds / 1_000_000_000)
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(max(0, nanoseconds))) { withdraw(.success(nil)) }
        }
        return try await answer.value(onCancel: { withdraw(.failure(.cancelled)) }).map(InputByteStream.init)
    }

    // MARK: Folders

    /// Shares the folder at `url` with `peers` (each must accept); it then stays in sync.
    @discardableResult
    public func share(folder url: URL, with peers: [PeerID]) throws(SyncpeerError) -> String {
        do throws(EngineError) {
            return try node.share(directory: url.standardizedFileURL.path, with: peers.map(\.deviceID)).folder
        } catch { throw SyncpeerError(error) }
    }

    /// Accepts a folder a peer shares, into `directory` (or the receive directory).
    public func acceptFolder(_ folderID: String, into directory: String? = nil) throws(SyncpeerError) {
        do throws(EngineError) { _ = try node.answerShare(folderID, accept: true, into: directory) } catch {
            throw SyncpeerError(error)
        }
    }

    /// One page of the shared folders, by label, from after `after` (the `next` of the page
    /// before; nil: the first page).
    /// A damaged or unreadable index throws its cause rather than showing zero counts.
    public func folders(after: String? = nil, limit: Int = Page<FolderStatus>.defaultLimit) throws(SyncpeerError) -> Page<FolderStatus> {
        do throws(EngineError) {
            return try node.apiFolders(PageRequest(limit: limit, after: after))
        } catch { throw SyncpeerError(error) }
    }

    /// One page of the conflicted files, by folder label and path (see `folders(after:limit:)`).
    public func conflicts(after: String? = nil, limit: Int = Page<Conflict>.defaultLimit) throws(SyncpeerError) -> Page<Conflict> {
        do throws(EngineError) {
            let page = try node.conflicts(PageRequest(limit: limit, after: after))
            return Page(items: page.items.map(Conflict.init), next: page.next)
        } catch { throw SyncpeerError(error) }
    }

    /// Every shared folder and how far it is, in one list (`folders(after:limit:)` reads
    /// them a page at a time).
    /// A damaged or unreadable index throws its cause rather than showing zero counts.
    public var folders: [FolderStatus] {
        get throws(SyncpeerError) {
            do throws(EngineError) { return try node.apiFolders(.everything).items } catch { throw SyncpeerError(error) }
        }
    }

    /// Conflicted files in shared folders, each with its versions, in one list
    /// (`conflicts(after:limit:)` reads them a page at a time).
    public var conflicts: [Conflict] {
        get throws(SyncpeerError) {
            do throws(EngineError) { return try node.conflicts().map(Conflict.init) } catch { throw SyncpeerError(error) }
        }
    }
}
