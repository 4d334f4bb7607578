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

    /// The DNS-SD service type the node is published under (`Configuration.serviceType`).
    public var serviceType: String { session.configuration.serviceType }
    /// The key-value pairs published with it (`Configuration.discoveryInfo`).
    public var discoveryInfo: [String: String] { session.configuration.discoveryInfo }

    /// Publishes the node on the discovery interfaces (a session made with `discovery: true`).
    public func start() throws(SyncpeerError) {
        do throws(EngineError) { _ = try session.node.setVisibility(true) } catch { throw SyncpeerError(error) }
    }

    public func stop() throws(SyncpeerError) {
        do throws(EngineError) { _ = try session.node.setVisibility(false) } catch { throw SyncpeerError(error) }
    }

    /// Invitations from now on, until the consumer stops iterating. At most 64 wait for the
    /// consumer; one more is declined at once (the inviter is told), never left unanswered.
    public var invitations: EventStream<Invitation> {
        let node = session.node
        let buffer = EventBuffer<Invitation>(capacity: 64, dropped: nil)
        let token = node.subscribe { [weak buffer] event in
            guard case let .invitation(invitation) = event else { return }
            let offered = Invitation(peer: PeerID(invitation.peer), context: invitation.context,
                                     code: invitation.code, id: invitation.invitation, node: node)
            // Answered off the node's queue, which delivers this event and which the answer needs.
            if buffer?.yield(offered) != true { DispatchQueue.global().async { try? offered.decline() } }
        }
        buffer.whenTerminated { node.unsubscribe(token) }
        return EventStream(buffer: buffer)
    }
}

/// Finds nearby nodes (`MCNearbyServiceBrowser`): `peers` yields each one found and lost.
public final class Browser: Sendable {
    let session: Session
    public init(session: Session) { self.session = session }

    /// The DNS-SD service type browsed for (`Configuration.serviceType`): only nodes of this
    /// type are found.
    public var serviceType: String { session.configuration.serviceType }

    public enum Change: Sendable, Equatable {
        /// A node is nearby, reachable at `address` ("host:port"), with the key-value pairs it
        /// publishes (its `discoveryInfo`; `browser(_:foundPeer:withDiscoveryInfo:)`).
        case found(PeerID, address: String?, info: [String: String])
        case lost(PeerID)
        /// The consumer fell behind: this many changes were left out (never silently); the
        /// next `peers` lists who is nearby now.
        case changesDropped(Int)
    }

    /// The nodes nearby now, then every change, until the consumer stops iterating (at most
    /// 256 wait for the consumer, then `.changesDropped`). Throws when discovery cannot be
    /// read (it is off, or failed).
    public var peers: EventStream<Change> {
        get throws(SyncpeerError) {
            let node = session.node
            let buffer = EventBuffer<Change>(capacity: 256) { .changesDropped($0) }
            let token = node.subscribe { [weak buffer] event in
                switch event {
                case let .found(found): buffer?.yield(.found(PeerID(found.peer), address: found.address, info: found.info))
                case let .lost(lost): buffer?.yield(.lost(PeerID(lost.peer)))
                default: break
                }
            }
            buffer.whenTerminated { node.unsubscribe(token) }
            do throws(EngineError) {
                for peer in try node.browse() {
                    buffer.yield(.found(PeerID(peer.peer), address: peer.address, info: peer.info))
                }
            } catch {
                throw SyncpeerError(error)
            }
            return EventStream(buffer: buffer)
        }
    }

    /// Invites a found peer (`invitePeer(_:to:withContext:timeout:)`).
    public func invite(_ peer: PeerID, context: String? = nil,
                       code: @escaping @Sendable (String) -> Void = { _ in }) async throws(SyncpeerError) -> PeerID {
        try await session.invite(peer.deviceID, context: context, code: code)
    }
}
