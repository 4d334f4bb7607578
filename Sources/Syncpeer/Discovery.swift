public import Foundation
internal import SyncEngine

/// An invitation from a peer (`MCNearbyServiceAdvertiser`'s `invitationHandler`): its
/// context, the 6-digit code both ends show, and the answer.
public struct Invitation: Sendable {
    public let peer: PeerID
    /// Why the peer invites us (`withContext:`), if it said.
    public let context: String?
    /// The short authentication code: equal on both screens unless someone is in the middle.
    public let code: String
    let id: String
    let node: Node

    /// Accepts: both ends pin each other's key and the session connects.
    public func accept() throws(SyncpeerError) {
        do throws(EngineError) { _ = try node.answer(invitation: id, accept: true) } catch { throw SyncpeerError(error) }
    }

    /// Declines: the inviter is told, nothing is pinned.
    public func decline() throws(SyncpeerError) {
        do throws(EngineError) { _ = try node.answer(invitation: id, accept: false) } catch { throw SyncpeerError(error) }
    }
}

/// Makes the session's node visible and hands out the invitations it receives
/// (`MCNearbyServiceAdvertiser`). Invitations arrive whether or not the node is visible
/// (a peer that knows the address can invite); `start`/`stop` change only visibility.
public final class Advertiser: Sendable {
    let session: Session
    public init(session: Session) { self.session = session }

    /// Publishes the node on the discovery interfaces (a session made with `discovery: true`).
    public func start() throws(SyncpeerError) {
        do throws(EngineError) { _ = try session.node.setVisibility(true) } catch { throw SyncpeerError(error) }
    }

    public func stop() throws(SyncpeerError) {
        do throws(EngineError) { _ = try session.node.setVisibility(false) } catch { throw SyncpeerError(error) }
    }

    /// Invitations from now on, until the consumer stops iterating.
    public var invitations: AsyncStream<Invitation> {
        let node = session.node
        return AsyncStream(bufferingPolicy: .bufferingNewest(64)) { continuation in
            let token = node.subscribe { event in
                guard case let .invitation(invitation) = event else { return }
                continuation.yield(Invitation(peer: PeerID(invitation.peer), context: invitation.context,
                                              code: invitation.code, id: invitation.invitation, node: node))
            }
            continuation.onTermination = { _ in node.unsubscribe(token) }
        }
    }
}

/// Finds nearby nodes (`MCNearbyServiceBrowser`): `peers` yields each one found and lost.
public final class Browser: Sendable {
    let session: Session
    public init(session: Session) { self.session = session }

    public enum Change: Sendable {
        /// A node is nearby, reachable at `address` ("host:port").
        case found(PeerID, address: String?)
        case lost(PeerID)
    }

    /// The nodes nearby now, then every change, until the consumer stops iterating.
    public var peers: AsyncStream<Change> {
        let node = session.node
        return AsyncStream(bufferingPolicy: .bufferingNewest(256)) { continuation in
            let token = node.subscribe { event in
                switch event {
                case let .found(found): continuation.yield(.found(PeerID(found.peer), address: found.address))
                case let .lost(lost): continuation.yield(.lost(PeerID(lost.peer)))
                default: break
                }
            }
            for peer in (try? node.browse()) ?? [] {
                continuation.yield(.found(PeerID(peer.peer), address: peer.address))
            }
            continuation.onTermination = { _ in node.unsubscribe(token) }
        }
    }

    /// Invites a found peer (`invitePeer(_:to:withContext:timeout:)`).
    public func invite(_ peer: PeerID, context: String? = nil,
                       code: @escaping @Sendable (String) -> Void = { _ in }) async throws(SyncpeerError) -> PeerID {
        try await session.invite(peer.deviceID, context: context, code: code)
    }
}
