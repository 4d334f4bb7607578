public import Foundation
public import SyncEngine
internal import Synchronization

/// A running syncpeer node and its sessions with peers: Multipeer Connectivity's
/// `MCSession`, with its `MCPeerID` (`myPeerID`). It owns a home folder (identity key,
/// index) like the `syncpeer` CLI's, and serves the same control socket, so
/// `syncpeer --home HOME …` commands work beside a program that uses this API.
///
/// ```swift
/// let session = try Session(home: "/tmp/alice", displayName: "alice")
/// for await event in session.events {
///     if case let .received(data, from) = event { print(from.displayName, data.count) }
/// }
/// ```
public final class Session: Sendable {
    /// Where the node is reached ("host:port").
    public let address: String
    /// This node.
    public let myPeerID: PeerID
    let daemon: Daemon
    var node: Node { daemon.node }

    /// What happens in the session, as `events` delivers it.
    public enum Event: Sendable {
        /// A peer's state changed (`session(_:peer:didChange:)`).
        case stateChanged(PeerID, PeerState)
        /// A message (`session(_:didReceive:fromPeer:)`).
        case received(Data, from: PeerID)
        /// A peer opened a stream (`session(_:didReceive:withName:fromPeer:)`); take it with
        /// `acceptStream`.
        case streamOffered(name: String, from: PeerID)
        /// A peer offers a resource (file or folder); answer with `acceptResource`.
        case resourceOffered(ResourceOffer)
        /// A resource finished, either way (`didFinishReceivingResourceWithName`).
        case resourceFinished(name: String, peer: PeerID, url: URL?, error: String?)
        /// A shared folder changed state (syncing, idle, a conflict).
        case folderChanged(folderID: String, state: String)
        /// A peer shares a folder with us; answer with `acceptFolder`.
        case folderOffered(folderID: String, label: String, from: PeerID)
    }

    /// A resource a peer offers (`didStartReceivingResourceWithName`).
    public struct ResourceOffer: Sendable {
        public let id: String
        public let name: String
        public let peer: PeerID
        public let totalBytes: Int64
        public let files: Int
    }

    /// Opens (creating it if needed) the node in `home` and starts it: it listens on
    /// `listen` and, with `discovery`, is found by `Browser`s on the chosen interfaces.
    /// `receiveDirectory` is where accepted resources go.
    public init(home: String, displayName: String, listen: String = "127.0.0.1:0",
                receiveDirectory: String? = nil, discovery: Bool = false) throws(SyncpeerError) {
        let nodeHome = NodeHome(path: home)
        if !FileManager.default.fileExists(atPath: nodeHome.keyFile) {
            do throws(EngineError) { _ = try NodeSetup.initialise(home: nodeHome, name: displayName) } catch {
                throw SyncpeerError(error)
            }
        }
        var config = NodeConfig()
        config.listen = listen
        config.discovery = discovery
        config.applyTestKnobs(ProcessInfo.processInfo.environment)
        if let receiveDirectory { config.receiveDirectory = receiveDirectory }
        do throws(EngineError) {
            daemon = try Daemon.start(home: nodeHome, config: config) { _ in }
        } catch {
            throw SyncpeerError(error)
        }
        address = daemon.listenAddress
        myPeerID = PeerID(PeerRef(id: daemon.node.identity.deviceID, name: daemon.node.identity.displayName))
    }

    /// Says goodbye to every peer and stops the node (`disconnect()`).
    public func close() {
        daemon.stop()
    }

    /// Peers with a connected session (`connectedPeers`).
    public var connectedPeers: [PeerID] {
        node.peers().filter { $0.state == .connected }.map { PeerID($0.peer) }
    }

    /// Every event from now on, until the consumer stops iterating. Each access is a new
    /// subscription.
    public var events: AsyncStream<Event> {
        let node = self.node
        return AsyncStream(bufferingPolicy: .bufferingNewest(4096)) { continuation in
            let token = node.subscribe { event in
                if let mapped = Session.map(event) { continuation.yield(mapped) }
            }
            let messages = node.subscribeMessages { peer, body in
                continuation.yield(.received(Data(body), from: PeerID(peer)))
            }
            continuation.onTermination = { _ in
                node.unsubscribe(token)
                node.unsubscribeMessages(messages)
            }
        }
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
            return .resourceFinished(name: info.name, peer: PeerID(peer), url: info.path.map(URL.init(fileURLWithPath:)),
                                     error: info.state == .completed ? nil : info.reason ?? info.state.rawValue)
        case let .shareOffer(offer):
            return .folderOffered(folderID: offer.folder, label: offer.name, from: PeerID(offer.peer))
        case let .folder(change):
            return .folderChanged(folderID: change.folder, state: change.state?.rawValue ?? "changed")
        default:
            return nil
        }
    }

    // MARK: Connecting

    /// Invites the node at `address` ("host:port", a discovered name or a device ID prefix)
    /// with `context` (`invitePeer(_:to:withContext:timeout:)`); returns the peer once it
    /// accepted. Both ends show the same 6-digit code meanwhile (`code`).
    public func invite(_ address: String, context: String? = nil,
                       code: @escaping @Sendable (String) -> Void = { _ in }) async throws(SyncpeerError) -> PeerID {
        let node = self.node
        let result: Result<PeerID, SyncpeerError> = await withCheckedContinuation { continuation in
            node.pair(address: address, context: context, progress: { event in
                if case let .invitationPending(shown) = event { code(shown.code) }
            }, completion: { result in
                continuation.resume(returning: result.map(PeerID.init).mapError(SyncpeerError.init))
            })
        }
        return try result.get()
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
    public func acceptStream(from peer: PeerID? = nil, timeout: Duration? = nil) async throws(SyncpeerError) -> InputByteStream? {
        let node = self.node
        let result: Result<IncomingByteStream?, EngineError> = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                do throws(EngineError) {
                    continuation.resume(returning: .success(try node.acceptStream(from: peer?.deviceID, timeout: timeout)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        do throws(EngineError) { return try result.get().map(InputByteStream.init) } catch { throw SyncpeerError(error) }
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

    /// Every shared folder and how far it is.
    /// A damaged or unreadable index throws its cause rather than showing zero counts.
    public var folders: [FolderStatus] {
        get throws(SyncpeerError) {
            do throws(EngineError) { return try node.folderStatus() } catch { throw SyncpeerError(error) }
        }
    }

    /// Conflict copies in shared folders.
    public var conflicts: [ConflictInfo] {
        get throws(SyncpeerError) {
            do throws(EngineError) { return try node.conflicts() } catch { throw SyncpeerError(error) }
        }
    }
}
